"""Gradient accumulation into contiguous ``main_grad`` buffers and their reduction.

Each parameter gets ``param.main_grad``, a view into one contiguous buffer per
gradient dtype (fp32 by default, so bf16/fp16 models accumulate micro-batch
gradients in fp32 as Megatron does). Parameters are laid out in reverse order
of registration, roughly the order in which backward produces their
gradients. A hook moves each freshly accumulated ``.grad`` into ``main_grad``.

``finalize_model_grads`` then makes the gradients those of the full model:
sums over TP of sequence-parallel parameters, sums over replicas of
replicated KV heads, and the mean over data-parallel ranks.
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional

import torch
from torch import nn

from core.parallel_state import Group, ParallelState
from core.tensor_parallel.layers import reduce_replicated_grads
from core.tensor_parallel.mappings import all_reduce


class GradBuffer:
    """One flat gradient tensor for a list of parameters, with a view per parameter."""

    def __init__(self, params: List[nn.Parameter], dtype: torch.dtype, device: torch.device) -> None:
        self.params = params
        numel = sum(p.numel() for p in params)
        self.data = torch.zeros(numel, dtype=dtype, device=device)
        offset = 0
        for param in params:
            param.main_grad = self.data[offset:offset + param.numel()].view_as(param)
            offset += param.numel()

    def zero(self) -> None:
        self.data.zero_()


def _accumulate_hook(param: torch.Tensor) -> None:
    param.main_grad.add_(param.grad)
    param.grad = None


class GradBuffers:
    """The buffers of a model (one per gradient dtype) and the hooks that fill them."""

    def __init__(self, module: nn.Module, grad_dtype: Optional[torch.dtype] = torch.float32) -> None:
        params = [p for p in module.parameters() if p.requires_grad]
        by_dtype: Dict[torch.dtype, List[nn.Parameter]] = {}
        for param in reversed(params):
            by_dtype.setdefault(grad_dtype or param.dtype, []).append(param)
        device = params[0].device if params else torch.device("cpu")
        self.buffers = [GradBuffer(group, dtype, device) for dtype, group in by_dtype.items()]
        self.handles = [p.register_post_accumulate_grad_hook(_accumulate_hook) for p in params]

    def zero(self) -> None:
        for buffer in self.buffers:
            buffer.zero()

    def all_reduce_mean(self, group: Group) -> None:
        """Average every buffer over ``group`` (one collective per buffer)."""
        if group.size == 1:
            return
        for buffer in self.buffers:
            all_reduce(buffer.data, group)
            buffer.data.div_(group.size)


def _sum_over_tp(params: Iterable[nn.Parameter], tp_group: Group) -> None:
    """All-reduce the gradients of TP-replicated parameters fed a sequence shard."""
    grads = [p.main_grad for p in params]
    if not grads or tp_group.size == 1:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce(flat, tp_group)
    offset = 0
    for grad in grads:
        grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
        offset += grad.numel()


def finalize_model_grads(models: List[nn.Module], buffers: List[GradBuffers], state: ParallelState) -> None:
    """Turn each rank's accumulated local gradients into the gradients of the full model."""
    tp_group = state.tp_group
    params = [p for model in models for p in model.parameters() if p.requires_grad]
    if tp_group.size > 1:
        _sum_over_tp([p for p in params if getattr(p, "sequence_parallel", False)], tp_group)
        for param in params:
            shard = getattr(param, "tp_shard", None)
            if shard is not None and shard.has_replicas(tp_group.size):
                reduce_replicated_grads(param.main_grad, shard, tp_group)
    for buffer in buffers:
        buffer.all_reduce_mean(state.dp_group)
