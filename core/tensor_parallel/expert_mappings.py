"""Expert-parallel communication, as small named autograd functions (the sibling of ``mappings.py``).

The MoE token dispatchers move tokens between the ranks of the expert-parallel
(EP) group with these and nothing else. Each takes the :class:`Group` it
communicates over and is the identity when that group has one member.

- ``exchange_token_counts``: every rank's token count for each rank (or for each
  expert of each rank) -> the count it receives from each (an all-to-all of the counts, done first, so that the
  variable-size exchange can allocate its output).
- ``all_to_all_tokens``: variable-size all-to-all along dim 0 / the reverse
  all-to-all of the gradient (the ``alltoall`` dispatcher).
- ``gather_tokens_from_expert_region``: all-gather along dim 0 with a different
  row count per rank / this rank's rows of the summed gradient (the
  ``allgather`` dispatcher).
- ``reduce_scatter_tokens_to_expert_region``: its transpose, the sum over the
  ranks of ``[sum(n_r), ...]`` cut to this rank's rows / the all-gathered
  gradient (the ``allgather`` dispatcher's combine).
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch
import torch.distributed as dist

from core.parallel_state import Group


def exchange_token_counts(counts: torch.Tensor, group: Group) -> torch.Tensor:
    """``counts[j]``: rows this rank sends to rank j (int64 ``[ep]``, or ``[ep, experts per rank]`` per expert)
    -> the same shape of rows it receives from each rank."""
    if group.size == 1:
        return counts.clone()
    if counts.shape[0] != group.size:
        raise ValueError(f"token counts have {counts.shape[0]} rows for an expert-parallel group of {group.size}")
    received = torch.empty_like(counts)
    dist.all_to_all_single(received, counts.contiguous(), group=group.handle)
    return received


def _all_to_all(x: torch.Tensor, output_splits: List[int], input_splits: List[int], group: Group) -> torch.Tensor:
    out = x.new_empty((sum(output_splits),) + tuple(x.shape[1:]))  # [received rows, ...]
    dist.all_to_all_single(out, x.contiguous(), output_split_sizes=output_splits, input_split_sizes=input_splits,
                           group=group.handle)
    return out


class _AllToAllTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, output_splits: List[int], input_splits: List[int],
                group: Group) -> torch.Tensor:
        ctx.splits, ctx.group = (output_splits, input_splits), group
        return _all_to_all(x, output_splits, input_splits, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        output_splits, input_splits = ctx.splits
        return _all_to_all(grad, input_splits, output_splits, ctx.group), None, None, None


def all_to_all_tokens(x: torch.Tensor, output_splits: Sequence[int], input_splits: Sequence[int],
                      group: Group) -> torch.Tensor:
    """Send rows ``x[sum(input_splits[:j]) : ...]`` ``[n, ...]`` to rank j; receive ``output_splits[j]`` rows
    from rank j, concatenated in rank order ``[sum(output_splits), ...]``."""
    if group.size == 1:
        return x
    return _AllToAllTokens.apply(x, [int(n) for n in output_splits], [int(n) for n in input_splits], group)


def _row_counts(x: torch.Tensor, group: Group) -> List[int]:
    own = torch.tensor([x.size(0)], dtype=torch.int64, device=x.device)
    counts = [torch.empty_like(own) for _ in range(group.size)]
    dist.all_gather(counts, own, group=group.handle)
    return [int(c.item()) for c in counts]


def _gather_rows(x: torch.Tensor, counts: List[int], group: Group) -> torch.Tensor:
    """Every rank's ``[counts[r], ...]`` rows, concatenated in rank order."""
    padded = x.new_zeros((max(counts),) + tuple(x.shape[1:]))  # every rank sends the same row count
    padded[:x.size(0)] = x
    gathered = [torch.empty_like(padded) for _ in range(group.size)]
    dist.all_gather(gathered, padded, group=group.handle)
    return torch.cat([part[:n] for part, n in zip(gathered, counts)])  # [sum(counts), ...]


def _sum_and_take_rows(x: torch.Tensor, counts: List[int], group: Group) -> torch.Tensor:
    """This rank's rows ``[counts[rank], ...]`` of the sum over the ranks of ``x`` [sum(counts), ...]."""
    total = x.contiguous().clone()
    dist.all_reduce(total, group=group.handle)
    start = sum(counts[:group.rank])
    return total[start:start + counts[group.rank]]


class _GatherTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, counts: List[int], group: Group) -> torch.Tensor:
        ctx.group, ctx.counts = group, counts
        return _gather_rows(x, counts, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _sum_and_take_rows(grad, ctx.counts, ctx.group), None, None  # every rank's use of every row


class _ReduceScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, counts: List[int], group: Group) -> torch.Tensor:
        ctx.group, ctx.counts = group, counts
        return _sum_and_take_rows(x, counts, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _gather_rows(grad.contiguous(), ctx.counts, ctx.group), None, None


def gather_tokens_from_expert_region(x: torch.Tensor, group: Group,
                                     counts: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Every rank's rows ``[n_r, ...]`` concatenated in rank order (``n_r`` may differ per rank; ``counts``,
    from :func:`token_counts`, saves exchanging them again when several tensors share them)."""
    if group.size == 1:
        return x
    counts = [int(n) for n in counts] if counts is not None else _row_counts(x, group)
    return _GatherTokens.apply(x, counts, group)


def reduce_scatter_tokens_to_expert_region(x: torch.Tensor, counts: Sequence[int], group: Group) -> torch.Tensor:
    """``x`` [sum(counts), ...] summed over the ranks, this rank's ``counts[rank]`` rows (rank order)."""
    if group.size == 1:
        return x
    return _ReduceScatterTokens.apply(x, [int(n) for n in counts], group)


def token_counts(x: torch.Tensor, group: Group) -> List[int]:
    """Every rank's row count of ``x`` (rank order); collective over ``group``."""
    return [x.size(0)] if group.size == 1 else _row_counts(x, group)
