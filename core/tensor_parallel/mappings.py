"""Every tensor-parallel communication, as small named autograd functions.

Layers compose these; nothing else in the code base calls a collective for
tensor or sequence parallelism. Each function takes the :class:`Group` it
communicates over and is the identity when that group has one member.

Names follow Megatron-core:
- ``copy_to_tensor_model_parallel_region``: identity forward, all-reduce backward.
- ``reduce_from_tensor_model_parallel_region``: all-reduce forward, identity backward.
- ``scatter_to_tensor_model_parallel_region``: keep own last-dim slice / all-gather.
- ``gather_from_tensor_model_parallel_region``: all-gather last dim / keep own slice.
- ``scatter_to_sequence_parallel_region``: keep own dim-0 slice / all-gather.
- ``gather_from_sequence_parallel_region``: all-gather dim 0 / reduce-scatter (or slice).
- ``reduce_scatter_to_sequence_parallel_region``: reduce-scatter dim 0 / all-gather.
- ``sum_partials_over_tensor_model_parallel_region``: all-reduce / all-reduce (a sum of per-rank
  partials that every rank then uses in its own way, e.g. the sum of squares of a full-width norm).

Beside them the plain collectives the others build on: ``all_reduce``, ``all_gather_single`` /
``reduce_scatter_single`` (one flat tensor), the ``*_along_dim`` helpers, and the run's yes/no questions:
``any_rank`` ("does any rank say yes?") and ``first_on_any_rank`` (the problem the lowest rank reports).
Context- and expert-parallel exchanges live beside this module (``cp_mappings.py``, ``expert_mappings.py``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import torch
import torch.distributed as dist

from core.device import current_device
from core.parallel_state import Group

# torch.distributed's one-tensor all-gather / reduce-scatter (out, tensor, group=, async_op=), by the older
# names where a build has no ``*_single``
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def all_reduce(tensor: torch.Tensor, group: Group, op: dist.ReduceOp = dist.ReduceOp.SUM) -> torch.Tensor:
    """Reduce over the group (sum by default), in place; returns the tensor."""
    if group.size > 1:
        dist.all_reduce(tensor, op=op, group=group.handle)
    return tensor


GroupLike = Union[Group, Any, None]  # our Group, a torch.distributed process group, or None: the whole run


def _handle(group: GroupLike) -> Any:
    return group.handle if isinstance(group, Group) else group


def any_rank_each(flags: Sequence[bool], group: GroupLike = None,
                  device: Optional[torch.device] = None) -> List[bool]:
    """For each of ``flags``, whether it holds on any rank of ``group`` (None: every rank of the run), in one
    all-reduce on ``device`` (default: this process's accelerator). Without torch.distributed initialised,
    this process is the run, and a Group of one asks nobody else. Collective: every rank of the group calls
    it with as many flags."""
    alone = isinstance(group, Group) and group.size == 1
    if alone or not (dist.is_available() and dist.is_initialized()):
        return [bool(flag) for flag in flags]
    values = torch.tensor([float(bool(flag)) for flag in flags], device=device or current_device())  # [flags]
    dist.all_reduce(values, op=dist.ReduceOp.MAX, group=_handle(group))
    return [value > 0 for value in values.tolist()]


def any_rank(flag: bool, group: GroupLike = None, device: Optional[torch.device] = None) -> bool:
    """Does any rank of ``group`` say yes? (see :func:`any_rank_each`)."""
    return any_rank_each([flag], group, device)[0]


def first_on_any_rank(value: Optional[Any], group: GroupLike = None) -> Optional[Any]:
    """The lowest rank's non-None ``value`` (a problem to report), on every rank of ``group`` (None: every
    rank of the run, or this process alone when there is none). Collective."""
    return next((v for v in gather_objects(value, group) if v is not None), None)


def gather_objects(value: Any, group: GroupLike = None) -> List[Any]:
    """Every rank's picklable ``value``, in rank order, on every rank of ``group`` (None: every rank of the
    run, or this process alone when there is none). Collective."""
    alone = isinstance(group, Group) and group.size == 1
    if alone or not (dist.is_available() and dist.is_initialized()):
        return [value]
    handle = _handle(group)
    every = [None] * dist.get_world_size(handle)
    dist.all_gather_object(every, value, group=handle)
    return every


def split_along_dim(tensor: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """This rank's contiguous slice of ``tensor`` along ``dim``."""
    if group.size == 1:
        return tensor
    if tensor.size(dim) % group.size != 0:
        raise ValueError(f"dimension {dim} of size {tensor.size(dim)} does not split over {group.size} ranks")
    return tensor.chunk(group.size, dim=dim)[group.rank].contiguous()


def all_gather_along_dim(tensor: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """Concatenate every rank's ``tensor`` along ``dim``."""
    if group.size == 1:
        return tensor
    moved = tensor.movedim(dim, 0).contiguous()  # gather along dim 0, then move back
    out = torch.empty((moved.size(0) * group.size,) + moved.shape[1:], dtype=tensor.dtype, device=tensor.device)
    all_gather_single(out, moved, group=group.handle)
    return out.movedim(0, dim)


def reduce_scatter_along_dim(tensor: torch.Tensor, dim: int, group: Group) -> torch.Tensor:
    """Sum over ranks, then keep this rank's slice along ``dim``."""
    if group.size == 1:
        return tensor
    moved = tensor.movedim(dim, 0).contiguous()
    if moved.size(0) % group.size != 0:
        raise ValueError(f"dimension {dim} of size {moved.size(0)} does not split over {group.size} ranks")
    out = torch.empty((moved.size(0) // group.size,) + moved.shape[1:], dtype=tensor.dtype, device=tensor.device)
    reduce_scatter_single(out, moved, group=group.handle)
    return out.movedim(0, dim)


class _CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_reduce(grad.clone(memory_format=torch.contiguous_format), ctx.group), None


class _ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        return all_reduce(x.clone(memory_format=torch.contiguous_format), group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


class _SumPartialsOverRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return all_reduce(x.clone(memory_format=torch.contiguous_format), group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # every rank's use of the sum reaches every partial
        return all_reduce(grad.clone(memory_format=torch.contiguous_format), ctx.group), None


class _ScatterToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return split_along_dim(x, -1, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_along_dim(grad, -1, ctx.group), None


class _GatherFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return all_gather_along_dim(x, -1, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return split_along_dim(grad, -1, ctx.group), None


class _ScatterToSequenceRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return split_along_dim(x, 0, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_along_dim(grad, 0, ctx.group), None


class _GatherFromSequenceRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group, output_grad_is_partial: bool) -> torch.Tensor:
        ctx.group, ctx.partial = group, output_grad_is_partial
        return all_gather_along_dim(x, 0, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        if ctx.partial:  # each rank holds a partial sum of the full-sequence gradient
            return reduce_scatter_along_dim(grad, 0, ctx.group), None, None
        return split_along_dim(grad, 0, ctx.group), None, None


class _ReduceScatterToSequenceRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        ctx.group = group
        return reduce_scatter_along_dim(x, 0, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return all_gather_along_dim(grad, 0, ctx.group), None


def copy_to_tensor_model_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _CopyToRegion.apply(x, group) if group.size > 1 else x


def reduce_from_tensor_model_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _ReduceFromRegion.apply(x, group) if group.size > 1 else x


def sum_partials_over_tensor_model_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _SumPartialsOverRegion.apply(x, group) if group.size > 1 else x


def scatter_to_tensor_model_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _ScatterToRegion.apply(x, group) if group.size > 1 else x


def gather_from_tensor_model_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _GatherFromRegion.apply(x, group) if group.size > 1 else x


def scatter_to_sequence_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _ScatterToSequenceRegion.apply(x, group) if group.size > 1 else x


def gather_from_sequence_parallel_region(x: torch.Tensor, group: Group,
                                         output_grad_is_partial: bool = True) -> torch.Tensor:
    return _GatherFromSequenceRegion.apply(x, group, output_grad_is_partial) if group.size > 1 else x


def reduce_scatter_to_sequence_parallel_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    return _ReduceScatterToSequenceRegion.apply(x, group) if group.size > 1 else x
