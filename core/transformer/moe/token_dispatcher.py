"""Token permutation for the experts, written once: group the routed copies of the tokens by expert and back.

At expert-parallel size 1 every rank holds every expert, so dispatching is a local sort:
:func:`permute` makes one row per (token, chosen expert) pair, rows ordered by expert (stable,
so tokens keep their order within an expert), and :func:`unpermute` adds each row, times its
routing weight, back into its token. With ``--moe-expert-capacity-factor`` an expert takes at
most ``ceil(tokens x topk / experts x factor)`` tokens; :func:`capacity_keep_mask` keeps the
ones with the highest routing weights (Megatron's "probs" drop policy) and the dropped pairs
are neither computed nor added back.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch


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
    """Expert outputs ``rows`` [pairs, h] times their weights (``weights`` [t, k]) summed into tokens: [t, h]."""
    scaled = rows * weights.flatten().index_select(0, permutation.pairs).unsqueeze(-1).to(rows.dtype)
    out = rows.new_zeros(weights.shape[0], rows.shape[-1])
    return out.index_add(0, permutation.tokens, scaled)
