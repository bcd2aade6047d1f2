"""Token permutation for the experts, written once, and the two expert-parallel token dispatchers.

:func:`permute` makes one row per (token, chosen expert) pair, rows ordered by expert (stable,
so tokens keep their order within an expert), and :func:`unpermute` adds each row, times its
routing weight, back into its token. At expert-parallel size 1 every rank holds every expert and
dispatching is this local sort. Under expert parallelism (EP rank ``r`` holds experts
``[r * E / ep, (r + 1) * E / ep)``) a dispatcher moves the rows to the rank of their expert and back
(``--moe-token-dispatcher-type``):

- :class:`AllToAllDispatcher` (``alltoall``): permute locally, exchange the per-expert row counts,
  send each rank the rows of its experts with one variable-size all-to-all, regroup the received
  rows by local expert; the combine undoes each step and unpermutes at the source.
- :class:`AllGatherDispatcher` (``allgather``): all-gather every rank's tokens, weights and choices
  over EP, compute the local experts' rows of all of them, unpermute into every rank's tokens and
  reduce-scatter the sums back.

Both give, for every token, exactly the rows and sums of EP 1, so EP changes no number. With ``--moe-expert-capacity-factor`` an expert takes at
most ``ceil(tokens x topk / experts x factor)`` tokens; :func:`capacity_keep_mask` keeps the
ones with the highest routing weights (Megatron's "probs" drop policy) and the dropped pairs
are neither computed nor added back.
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional

import torch

from core.parallel_state import Group
from core.tensor_parallel.expert_mappings import (all_to_all_tokens, exchange_token_counts,
                                                  gather_tokens_from_expert_region,
                                                  reduce_scatter_tokens_to_expert_region, token_counts)


class Permutation(NamedTuple):
    """Where each permuted row comes from."""

    tokens: torch.Tensor  # [rows] the token of each row
    pairs: torch.Tensor  # [rows] the (token, slot) pair of each row, flat index token * topk + slot
    tokens_per_expert: torch.Tensor  # [experts] rows per expert (int64), in row order


def expert_capacity(num_tokens: int, topk: int, num_experts: int, capacity_factor: float) -> int:
    """Megatron's capacity: ceil(tokens x topk / experts x factor)."""
    return math.ceil(num_tokens * topk / num_experts * capacity_factor)


def capacity_keep_mask(weights: torch.Tensor, indices: torch.Tensor, num_experts: int,
                       capacity: int) -> torch.Tensor:
    """[tokens, topk] bool: the pairs each expert keeps, its ``capacity`` highest-weight tokens."""
    tokens = weights.shape[0]
    dense = torch.full((tokens, num_experts), float("-inf"), dtype=torch.float32, device=weights.device)
    dense.scatter_(1, indices, weights.detach().float())  # [t, e], -inf where not routed
    keep_dense = torch.zeros_like(dense, dtype=torch.bool)
    if capacity > 0:
        top = dense.topk(min(capacity, tokens), dim=0).indices  # [capacity, e]
        keep_dense.scatter_(0, top, True)
    keep_dense &= dense > float("-inf")
    return keep_dense.gather(1, indices)  # [t, k]


def permute(hidden: torch.Tensor, indices: torch.Tensor, num_experts: int,
            keep: Optional[torch.Tensor] = None) -> "tuple[torch.Tensor, Permutation]":
    """``hidden`` [t, h], ``indices`` [t, k] -> rows [kept pairs, h] grouped by expert, and their origin."""
    topk = indices.shape[1]
    experts = indices.flatten()  # [t * k]
    pairs = torch.arange(experts.numel(), device=experts.device)
    if keep is not None:
        pairs = pairs[keep.flatten()]
        experts = experts[pairs]
    order = torch.argsort(experts, stable=True)
    pairs = pairs[order]
    tokens = pairs // topk
    tokens_per_expert = torch.bincount(experts, minlength=num_experts)
    return hidden.index_select(0, tokens), Permutation(tokens, pairs, tokens_per_expert)


def unpermute(rows: torch.Tensor, permutation: Permutation, weights: torch.Tensor) -> torch.Tensor:
    """Expert outputs ``rows`` [pairs, h] times their weights (``weights`` [t, k]) summed into tokens: [t, h], in
    the more precise of the two dtypes (--moe-router-dtype), returned in the rows' dtype."""
    compute = torch.promote_types(rows.dtype, weights.dtype)
    scaled = rows.to(compute) * weights.flatten().index_select(0, permutation.pairs).unsqueeze(-1).to(compute)
    out = scaled.new_zeros(weights.shape[0], rows.shape[-1])
    return out.index_add(0, permutation.tokens, scaled).to(rows.dtype)


class TokenDispatcher:
    """Moves the routed rows of this rank's tokens to the experts' ranks (:meth:`dispatch`) and their outputs
    back into the tokens (:meth:`combine`); the two are called in pairs, one MoE forward at a time."""

    def __init__(self, num_experts: int, group: Group) -> None:
        if num_experts % group.size != 0:
            raise ValueError(f"--num-experts {num_experts} is not divisible by --expert-model-parallel-size "
                             f"{group.size}")
        self.num_experts, self.group = num_experts, group
        self.local_experts = num_experts // group.size
        self.first_local_expert = group.rank * self.local_experts

    def dispatch(self, tokens: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor,
                 keep: Optional[torch.Tensor]) -> "tuple[torch.Tensor, torch.Tensor]":
        """``tokens`` [t, h], ``weights``/``indices``/``keep`` [t, k] -> rows [n, h] grouped by local expert and
        the rows per local expert [local experts]."""
        raise NotImplementedError

    def combine(self, rows: torch.Tensor) -> torch.Tensor:
        """The local experts' outputs ``rows`` [n, h] (the order of :meth:`dispatch`) -> [t, h]."""
        raise NotImplementedError


class AllToAllDispatcher(TokenDispatcher):
    """Local permutation, then one variable-size all-to-all each way (counts exchanged first)."""

    def dispatch(self, tokens, weights, indices, keep):
        rows, self.permutation = permute(tokens, indices, self.num_experts, keep)  # [pairs, h] by global expert
        self.weights = weights
        if self.group.size == 1:
            return rows, self.permutation.tokens_per_expert
        sent = self.permutation.tokens_per_expert.view(self.group.size, self.local_experts)  # [ep, local]
        received = exchange_token_counts(sent, self.group)  # [ep, local] rows from each rank per local expert
        self.splits = (received.sum(dim=1).tolist(), sent.sum(dim=1).tolist())  # (receive, send) per rank
        arrived = all_to_all_tokens(rows, *self.splits, self.group)  # [n, h] by (source rank, local expert)
        self.order = _by_expert_order(received)  # [n]: the rows regrouped by (local expert, source rank)
        return arrived.index_select(0, self.order), received.sum(dim=0)

    def combine(self, rows):
        if self.group.size > 1:
            in_arrival_order = rows.index_select(0, torch.argsort(self.order))  # [n, h]
            received, sent = self.splits
            rows = all_to_all_tokens(in_arrival_order, sent, received, self.group)  # [pairs, h] back at the source
        return unpermute(rows, self.permutation, self.weights)


class AllGatherDispatcher(TokenDispatcher):
    """Every rank's tokens gathered over EP; each rank computes its experts' share and the sums are
    reduce-scattered back."""

    def dispatch(self, tokens, weights, indices, keep):
        self.counts = token_counts(tokens, self.group)  # exchanged once for the four gathers
        all_tokens = gather_tokens_from_expert_region(tokens, self.group, self.counts)  # [T, h]
        self.weights = gather_tokens_from_expert_region(weights, self.group, self.counts)  # [T, k]
        all_indices = gather_tokens_from_expert_region(indices, self.group, self.counts)  # [T, k]
        local = (all_indices >= self.first_local_expert) & (all_indices < self.first_local_expert + self.local_experts)
        if keep is not None:
            local &= gather_tokens_from_expert_region(keep.to(torch.uint8), self.group, self.counts).bool()
        rows, self.permutation = permute(all_tokens, all_indices, self.num_experts, local)  # [n, h]
        counts = self.permutation.tokens_per_expert
        return rows, counts[self.first_local_expert:self.first_local_expert + self.local_experts]

    def combine(self, rows):
        summed = unpermute(rows, self.permutation, self.weights)  # [T, h] this rank's experts' share
        return reduce_scatter_tokens_to_expert_region(summed, self.counts, self.group)  # [t, h]


DISPATCHERS = {"alltoall": AllToAllDispatcher, "allgather": AllGatherDispatcher}


def _by_expert_order(received: torch.Tensor) -> torch.Tensor:
    """Row indices that regroup rows arriving as chunks ``received`` [ranks, experts] (rank-major) expert-major."""
    sizes = received.flatten().tolist()
    starts: List[int] = [0]
    for size in sizes[:-1]:
        starts.append(starts[-1] + size)
    ranks, experts = received.shape
    pieces = [torch.arange(starts[r * experts + e], starts[r * experts + e] + sizes[r * experts + e])
              for e in range(experts) for r in range(ranks)]
    return torch.cat(pieces).to(received.device) if pieces else received.new_zeros(0)
