"""Fused QKV row layouts: ours ``[Q heads; K heads; V heads]`` and the per-group interleaved one.

The interleaved layout stores, for each of the ``groups`` KV groups, that
group's ``heads // groups`` query heads, then its key head, then its value head:
rows ``[groups, heads // groups + 2, head_dim]``. Megatron-LM and MindSpeed-LLM
write their ``linear_qkv`` this way; with ``groups == heads`` it is GPT-NeoX's,
Bloom's and Persimmon's per-head ``[heads, 3, head_dim]``, and Falcon's
``new_decoder_architecture`` uses it with its KV heads.

Both functions work on weights ``[rows, in]`` and biases ``[rows]`` alike.
"""
from __future__ import annotations

import torch


def interleaved_to_ours(tensor: torch.Tensor, heads: int, groups: int, head_dim: int) -> torch.Tensor:
    """Per-group interleaved rows -> ``[Q; K; V]`` rows (same shape)."""
    per_group = heads // groups
    grouped = tensor.reshape(groups, per_group + 2, head_dim, *tensor.shape[1:])  # [g, q/g + 2, hn, ...]
    q, k, v = grouped.split([per_group, 1, 1], dim=1)
    rest = tensor.shape[1:]
    return torch.cat([q.reshape(heads * head_dim, *rest), k.reshape(groups * head_dim, *rest),
                      v.reshape(groups * head_dim, *rest)], dim=0)


def ours_to_interleaved(tensor: torch.Tensor, heads: int, groups: int, head_dim: int) -> torch.Tensor:
    """``[Q; K; V]`` rows -> per-group interleaved rows (same shape)."""
    per_group = heads // groups
    rest = tensor.shape[1:]
    q, k, v = tensor.split([heads * head_dim, groups * head_dim, groups * head_dim], dim=0)
    grouped = torch.cat([q.reshape(groups, per_group, head_dim, *rest), k.reshape(groups, 1, head_dim, *rest),
                         v.reshape(groups, 1, head_dim, *rest)], dim=1)  # [g, q/g + 2, hn, ...]
    return grouped.reshape(tensor.shape).contiguous()
