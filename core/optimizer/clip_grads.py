"""Global gradient norm over TP and PP, and clipping by it.

A parameter replicated over TP (a norm weight, a row-parallel bias) is
counted once: on TP rank 0 only. A fused weight with replicated KV heads
counts each replicated head once by weighting its rows by ``units / tp``.
A parameter marked ``shared`` (the last pipeline stage's copy of tied
embeddings) is not counted: its twin on the first stage is.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
import torch.distributed as dist

from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce


def _norm_squared(param: torch.Tensor, grad: torch.Tensor, tp_rank: int, tp: int) -> torch.Tensor:
    return norm_squared_of_range(param, grad.reshape(-1), 0, tp_rank, tp)


def norm_squared_of_range(param: torch.Tensor, grad: torch.Tensor, flat_start: int, tp_rank: int,
                          tp: int) -> torch.Tensor:
    """Squared norm of ``grad``, the elements ``[flat_start, flat_start + n)`` of ``param`` flattened,
    counting TP-replicated values once (distributed optimizer pieces)."""
    if getattr(param, "shared", False):
        return grad.new_zeros((), dtype=torch.float32)
    shard = getattr(param, "tp_shard", None)
    if shard is None:
        return grad.float().pow(2).sum() if tp_rank == 0 else grad.new_zeros((), dtype=torch.float32)
    if not shard.has_replicas(tp):
        return grad.float().pow(2).sum()
    if shard.dim != 0:
        raise NotImplementedError("replicated TP segments are only split along dim 0 (column-parallel)")
    # replicated segments split rows (dim 0): weight each row by 1 or units / tp
    row_length = param[0].numel()
    rows = torch.arange(flat_start, flat_start + grad.numel(), device=grad.device) // row_length
    weights, offset = torch.ones(param.shape[0], device=grad.device), 0
    for seg in shard.segments:
        count = seg.local_units(tp) * seg.unit_size
        if seg.is_replicated(tp):
            weights[offset:offset + count] = seg.units / tp
        offset += count
    return (grad.float().pow(2) * weights[rows]).sum()


def global_grad_norm(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], tp_group: Group,
                     model_parallel_group: Group) -> float:
    """L2 norm of the full model's gradient, identical on every rank of the model-parallel group."""
    if grads:
        device = grads[0].device
        total = torch.stack([_norm_squared(p, g, tp_group.rank, tp_group.size) for p, g in zip(params, grads)]).sum()
    else:
        device = torch.device("cpu")
        total = torch.zeros((), device=device)
    total = total.reshape(1).to(device)
    all_reduce(total, model_parallel_group)
    return float(total.sqrt().item())


def clip_grads(grads: List[torch.Tensor], total_norm: float, max_norm: float) -> None:
    """Scale gradients in place so their global norm is at most ``max_norm``."""
    if max_norm <= 0:
        return
    coefficient = max_norm / (total_norm + 1.0e-6)
    if coefficient < 1.0:
        torch._foreach_mul_(grads, coefficient)


def any_non_finite(grads: Sequence[torch.Tensor], model_parallel_group: Group) -> bool:
    """True when any rank of the group holds an inf or nan gradient."""
    device = grads[0].device if grads else torch.device("cpu")
    flag = torch.zeros(1, device=device)
    for grad in grads:
        if not torch.isfinite(grad).all():
            flag.fill_(1.0)
            break
    all_reduce(flag, model_parallel_group, dist.ReduceOp.MAX)
    return bool(flag.item() > 0)
