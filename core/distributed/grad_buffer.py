"""Gradient accumulation into contiguous, bucketed ``main_grad`` buffers and their reduction.

Each parameter gets ``param.main_grad``, a view into one contiguous buffer per
(parameter dtype, gradient dtype) pair: fp32 by default, so bf16/fp16 models
accumulate micro-batch gradients in fp32 as Megatron does with
``--accumulate-allreduce-grads-in-fp32``. Parameters are laid out in reverse
order of registration, roughly the order in which backward produces their
gradients, and the buffer is cut into buckets of about ``bucket_size``
elements (``--ddp-bucket-size``).

A hook moves each freshly accumulated ``.grad`` into ``main_grad``
(:meth:`GradBuffers.accumulate`; zero-bubble's deferred weight gradients
arrive the same way, at their W step, and mark readiness then). With
``overlap_grad_reduce``, once every gradient of a bucket is complete during
the last micro-batch's backward (the schedule keeps the other micro-batches
inside ``no_sync()``), the bucket's all-reduce (or reduce-scatter, for the
distributed optimizer) starts asynchronously; ``finish_grad_sync`` waits for
all of them before the optimizer step. Gradients are divided by the DP size
before the sum, so the result is the DP mean.

With the distributed optimizer, parameters also live in a contiguous
``param_data`` buffer of the same layout, so updated shards can be
all-gathered straight into the model's weights. Each bucket is padded to a
multiple of the DP size and DP rank ``r`` owns the ``r``-th chunk of every bucket.

Expert parameters (``ParamMeta.is_expert``) sit in buffers of their own whose
buckets reduce over the expert-DP group instead of the DP group. They are still
divided by the dense DP size: an expert's local gradient already sums the tokens
that every EP rank of its group sent it, so the sum over expert-DP covers the
whole global batch (Megatron scales expert gradients the same way).

``finalize_model_grads`` then makes the gradients those of the full model
(all read from each parameter's :class:`~core.tensor_parallel.param_meta.ParamMeta`):
sums over TP of gradients that are partial sums there, sums over replicas of
replicated KV heads, the DP mean and, for tied embeddings split over pipeline
stages, the sum of both copies' gradients over the embedding group.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import nn

from core.parallel_state import Group, ParallelState
from core.tensor_parallel.mappings import all_gather_single, all_reduce, reduce_scatter_single
from core.tensor_parallel.param_meta import param_meta, sum_replicas_over_tp
from core.transformer.shared_block import sum_shared_block_grads


DEFAULT_BUCKET_SIZE = 40_000_000  # elements, as Megatron's default
# Elements per piece when a CPU gradient of another dtype (bf16) is added into main_grad (fp32); see add_into.
_MIXED_ADD_PIECE = 1 << 17


def add_into(main_grad: torch.Tensor, grad: torch.Tensor) -> None:
    """``main_grad += grad``. On the CPU, adding a bf16/fp16 ``grad`` to fp32 ``main_grad`` first casts the whole
    operand into a temporary (64 MB and 12.5 ms for a 32k x 512 embedding); piece by piece the cast stays
    in cache (3.4 ms), with the same sums. Accelerators cast on the fly in one kernel."""
    mixed_on_cpu = grad.dtype != main_grad.dtype and grad.device.type == "cpu"
    if not mixed_on_cpu or grad.numel() <= _MIXED_ADD_PIECE or not grad.is_contiguous():
        main_grad.add_(grad)
        return
    torch._foreach_add_(main_grad.view(-1).split(_MIXED_ADD_PIECE), grad.view(-1).split(_MIXED_ADD_PIECE))


class Bucket:
    """A contiguous run of parameters whose gradients are reduced by one collective."""

    def __init__(self, params: List[nn.Parameter], grad_data: torch.Tensor, param_data: Optional[torch.Tensor],
                 offset: int, dp_group: Group, scatter: bool, divisor: Optional[int] = None) -> None:
        self.params, self.grad_data, self.param_data = params, grad_data, param_data
        self.offset, self.dp_group, self.scatter = offset, dp_group, scatter
        self.divisor = divisor or dp_group.size  # the batch's DP size (experts: the dense one)
        self.shard_size = grad_data.numel() // dp_group.size
        self.pending: set = set()
        self.work = None
        self.shard_out: Optional[torch.Tensor] = None
        self.launched = False
        self.collectives = 0  # how many reductions this bucket has started (tests read it)

    def reset(self) -> None:
        self.pending = {id(p) for p in self.params}
        self.work, self.shard_out, self.launched = None, None, False

    def shard(self, data: torch.Tensor) -> torch.Tensor:
        """This DP rank's chunk of a bucket-shaped tensor."""
        rank = self.dp_group.rank
        return data[rank * self.shard_size:(rank + 1) * self.shard_size]

    def mark_ready(self, param: nn.Parameter) -> bool:
        """Record a complete gradient; True when the whole bucket is complete."""
        self.pending.discard(id(param))
        return not self.pending

    def start(self) -> None:
        """Scale by 1/DP and launch the (asynchronous) all-reduce or reduce-scatter."""
        if self.launched:
            return
        self.launched = True
        if self.divisor > 1:
            self.grad_data.div_(self.divisor)
        if self.dp_group.size == 1:
            return
        self.collectives += 1
        if self.scatter:
            self.shard_out = torch.empty_like(self.shard(self.grad_data))
            self.work = reduce_scatter_single(self.shard_out, self.grad_data, group=self.dp_group.handle,
                                               async_op=True)
        else:
            self.work = dist.all_reduce(self.grad_data, group=self.dp_group.handle, async_op=True)

    def finish(self) -> None:
        self.start()
        if self.work is not None:
            self.work.wait()
            self.work = None
        if self.shard_out is not None:  # reduced chunk back into place; other chunks are stale
            self.shard(self.grad_data).copy_(self.shard_out)
            self.shard_out = None

    def all_gather_params(self, async_op: bool = False):
        """Every rank's updated parameter chunk into ``param_data`` (distributed optimizer)."""
        if self.dp_group.size == 1:
            return None
        mine = self.shard(self.param_data).clone()
        return all_gather_single(self.param_data, mine, group=self.dp_group.handle, async_op=async_op)


def _bucket_ranges(params: List[nn.Parameter], bucket_size: int, pad_to: int) -> List[Tuple[int, int, list]]:
    """Split params (in order) into buckets of about ``bucket_size`` elements: (start, end, params).

    A word-embedding weight shared across pipeline stages (``shared_across_stages``) gets a
    bucket of its own: both stages then cut it into the same DP chunks, so summing its
    gradient over the embedding group stays right after a reduce-scatter. So does every
    parameter of a shared block (``replicated_over_pipeline``), summed over its copies.
    """
    ranges: List[Tuple[int, int, list]] = []
    current: List[nn.Parameter] = []
    start = size = 0

    def close() -> None:
        nonlocal start, current, size
        if current:
            padded = -(-size // pad_to) * pad_to
            ranges.append((start, start + padded, current))
            start, current, size = start + padded, [], 0

    for param in params:
        meta = param_meta(param)
        alone = meta.shared_across_stages or meta.replicated_over_pipeline
        if alone:
            close()
        current.append(param)
        size += param.numel()
        if alone or size >= bucket_size:
            close()
    close()
    return ranges


class GradBuffer:
    """One flat gradient tensor (and, for the distributed optimizer, parameter tensor), in buckets."""

    def __init__(self, params: List[nn.Parameter], grad_dtype: torch.dtype, device: torch.device,
                 dp_group: Group, bucket_size: int, distributed_optimizer: bool,
                 divisor: Optional[int] = None) -> None:
        self.params, self.grad_dtype = params, grad_dtype
        pad_to = dp_group.size if distributed_optimizer else 1
        ranges = _bucket_ranges(params, bucket_size, pad_to)
        numel = ranges[-1][1] if ranges else 0
        self.data = torch.zeros(numel, dtype=grad_dtype, device=device)
        self.param_data = None
        if distributed_optimizer:
            self.param_data = torch.zeros(numel, dtype=params[0].dtype, device=device)
        self.param_ranges: Dict[int, Tuple[int, int]] = {}
        self.buckets: List[Bucket] = []
        for start, end, members in ranges:
            offset = start
            for param in members:
                self._place(param, offset)
                offset += param.numel()
            param_view = self.param_data[start:end] if self.param_data is not None else None
            self.buckets.append(Bucket(members, self.data[start:end], param_view, start, dp_group,
                                       scatter=distributed_optimizer, divisor=divisor))

    def _place(self, param: nn.Parameter, offset: int) -> None:
        end = offset + param.numel()
        self.param_ranges[id(param)] = (offset, end)
        param.main_grad = self.data[offset:end].view_as(param)
        if self.param_data is not None:  # the weights move into the contiguous buffer
            self.param_data[offset:end].copy_(param.data.reshape(-1))
            param.data = self.param_data[offset:end].view_as(param)

    def zero(self) -> None:
        self.data.zero_()


class GradBuffers:
    """The buffers of one model (chunk), the hooks that fill them and the reductions."""

    def __init__(self, module: nn.Module, grad_dtype: Optional[torch.dtype] = torch.float32,
                 dp_group: Optional[Group] = None, bucket_size: Optional[int] = None,
                 overlap_grad_reduce: bool = False, distributed_optimizer: bool = False,
                 expert_dp_group: Optional[Group] = None, divisor: Optional[int] = None) -> None:
        """``divisor``: what the summed gradients are divided by, the batch's DP size (default: the size of
        ``dp_group``; with context parallelism the group also spans the CP ranks, whose shares add up)."""
        self.dp_group = dp_group or Group([0])
        self.expert_dp_group = expert_dp_group
        self.overlap_grad_reduce = overlap_grad_reduce
        self.sync_enabled = True
        params = [p for p in module.parameters() if p.requires_grad]
        # (param dtype, grad dtype, expert) -> parameters, in reverse order of registration
        by_kind: Dict[Tuple[torch.dtype, torch.dtype, bool], List[nn.Parameter]] = {}
        for param in reversed(params):
            by_kind.setdefault((param.dtype, grad_dtype or param.dtype, param_meta(param).is_expert), []).append(param)
        device = params[0].device if params else torch.device("cpu")
        self.buffers = [GradBuffer(group, gdtype, device, self._dp_group_for(expert),
                                   bucket_size or DEFAULT_BUCKET_SIZE, distributed_optimizer,
                                   divisor or self.dp_group.size)
                        for (_, gdtype, expert), group in by_kind.items()]
        self.bucket_of = {id(p): bucket for buf in self.buffers for bucket in buf.buckets for p in bucket.params}
        self.handles = [p.register_post_accumulate_grad_hook(self._hook) for p in params]
        self.reset()

    def _dp_group_for(self, expert: bool) -> Group:
        if not expert:
            return self.dp_group
        if self.expert_dp_group is None:
            raise ValueError("the model has expert parameters: pass GradBuffers(expert_dp_group="
                             "state.group('expert_dp'))")
        return self.expert_dp_group

    @property
    def buckets(self) -> List[Bucket]:
        return [bucket for buffer in self.buffers for bucket in buffer.buckets]

    def accumulate(self, param: nn.Parameter, grad: torch.Tensor) -> None:
        """Add one gradient contribution to ``main_grad``; outside ``no_sync()`` (with
        ``overlap_grad_reduce``) it is the parameter's last one, and a complete bucket starts its reduction."""
        add_into(param.main_grad, grad)
        if self.overlap_grad_reduce and self.sync_enabled:
            bucket = self.bucket_of[id(param)]
            if bucket.mark_ready(param):
                bucket.start()

    def _hook(self, param: torch.Tensor) -> None:
        # A backward whose weight gradient is deferred (zero-bubble's B, see
        # core.tensor_parallel.layers.WeightGradStore) still runs the hook, with no gradient:
        # nothing to add and the parameter is not complete; its W step accumulates it later.
        if param.grad is None:
            return
        self.accumulate(param, param.grad)
        param.grad = None

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside accumulate without starting any reduction."""
        self.sync_enabled = False
        try:
            yield
        finally:
            self.sync_enabled = True

    def reset(self) -> None:
        """Zero the gradients and re-arm the buckets for a new step."""
        for buffer in self.buffers:
            buffer.zero()
        for bucket in self.buckets:
            bucket.reset()

    def zero(self) -> None:
        self.reset()

    def finish_grad_sync(self) -> None:
        """Start what has not started (no overlap, or unused parameters) and wait for all."""
        for bucket in self.buckets:
            bucket.finish()


def _sum_over_tp(params: Iterable[nn.Parameter], tp_group: Group) -> None:
    """All-reduce, in one flat collective, the gradients that are partial sums over TP."""
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
    """Turn each rank's accumulated local gradients into the gradients of the full model.

    The DP mean comes first (it may already be in flight); the TP sums after it are
    element-wise, so they are also right on the DP chunk a rank owns after a reduce-scatter.
    """
    for buffer in buffers:
        buffer.finish_grad_sync()
    tp_group = state.tp_group
    params = [p for model in models for p in model.parameters() if p.requires_grad]
    if tp_group.size > 1:
        _sum_over_tp([p for p in params if param_meta(p).grad_partial_over_tp], tp_group)
        for param in params:
            shard = param_meta(param).tp_shard
            if shard is not None and shard.has_replicas(tp_group.size):
                sum_replicas_over_tp(param.main_grad.view(-1), shard, param.shape, 0, tp_group)
    _sum_shared_embeddings(params, state)
    sum_shared_block_grads(models, state)


def _sum_shared_embeddings(params: List[nn.Parameter], state: ParallelState) -> None:
    """Tied embeddings over pipeline stages: the first stage's word embeddings and the last
    stage's copy both get the sum of their gradients (a middle stage is in no embedding group)."""
    group = state.groups.get("embedding")
    shared = [p for p in params if param_meta(p).shared_across_stages]
    if group is None or group.size == 1 or not shared:
        return
    for param in shared:
        all_reduce(param.main_grad, group)
