"""Expert-parallel communication, as small named autograd functions (the sibling of ``mappings.py``).

The MoE token dispatchers move tokens between the ranks of the expert-parallel
(EP) group with these and nothing else. Each takes the :class:`Group` it
communicates over and is the identity when that group has one member.

- ``exchange_token_counts``: every rank's token count for each rank -> the count
  it receives from each (an all-to-all of the counts, done first, so that the
  variable-size exchange can allocate its output).
- ``all_to_all_tokens``: variable-size all-to-all along dim 0 / the reverse
  all-to-all of the gradient (the ``alltoall`` dispatcher).
- ``gather_tokens_from_expert_region``: all-gather along dim 0 with a different
  row count per rank / this rank's rows of the summed gradient (the
  ``allgather`` dispatcher).
"""
from __future__ import annotations

from typing import List, Sequence

import torch
import torch.distributed as dist

from core.parallel_state import Group


def exchange_token_counts(counts: torch.Tensor, group: Group) -> torch.Tensor:
    """``counts[j]``: rows this rank sends to rank j (int64 ``[ep]``) -> rows it receives from each."""
    if group.size == 1:
        return counts.clone()
    if counts.numel() != group.size:
        raise ValueError(f"token counts have {counts.numel()} entries for an expert-parallel group of {group.size}")
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


class _GatherTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group: Group) -> torch.Tensor:
        counts = _row_counts(x, group)
        ctx.group, ctx.counts = group, counts
        longest = max(counts)
        padded = x.new_zeros((longest,) + tuple(x.shape[1:]))  # every rank sends the same row count
        padded[:x.size(0)] = x
        gathered = [torch.empty_like(padded) for _ in range(group.size)]
        dist.all_gather(gathered, padded, group=group.handle)
        return torch.cat([part[:n] for part, n in zip(gathered, counts)])  # [sum(counts), ...]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group.handle)  # every rank's use of every row
        start = sum(ctx.counts[:ctx.group.rank])
        return grad[start:start + ctx.counts[ctx.group.rank]], None


def gather_tokens_from_expert_region(x: torch.Tensor, group: Group) -> torch.Tensor:
    """Every rank's rows ``[n_r, ...]`` concatenated in rank order (``n_r`` may differ per rank)."""
    if group.size == 1:
        return x
    return _GatherTokens.apply(x, group)
