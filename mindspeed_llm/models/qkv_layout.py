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


def blocked_to_ours(tensor: torch.Tensor, blocks: int, order: str = "qvk") -> torch.Tensor:
    """CodeGen's fused rows -> ``[Q; K; V]`` rows (multi-head attention, same shape).

    CodeGen stores ``blocks`` (its ``mp_num``, 4) blocks of rows, each holding a
    slice of ``rows / (3 blocks)`` rows of every projection in ``order`` (q, v, k);
    a projection is the concatenation of its slices over the blocks.
    """
    width = tensor.shape[0] // (3 * blocks)
    parts = tensor.reshape(blocks, 3, width, *tensor.shape[1:])  # [blocks, 3, rows/(3 blocks), ...]
    by_name = {name: parts[:, index].reshape(blocks * width, *tensor.shape[1:]) for index, name in enumerate(order)}
    return torch.cat([by_name["q"], by_name["k"], by_name["v"]], dim=0)


def ours_to_blocked(tensor: torch.Tensor, blocks: int, order: str = "qvk") -> torch.Tensor:
    """``[Q; K; V]`` rows -> CodeGen's blocked rows (inverse of :func:`blocked_to_ours`)."""
    rows = tensor.shape[0] // 3
    width = rows // blocks
    q, k, v = (part.reshape(blocks, width, *tensor.shape[1:]) for part in tensor.split(rows, dim=0))
    by_name = {"q": q, "k": k, "v": v}
    return torch.stack([by_name[name] for name in order], dim=1).reshape(tensor.shape).contiguous()
