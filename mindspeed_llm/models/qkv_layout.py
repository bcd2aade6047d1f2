"""Row layouts of a fused QKV weight or bias: ours versus per-group interleaved.

Ours (``decoder.layers.{i}.self_attention.linear_qkv``) stacks whole blocks::

    [Q heads (heads x head_dim); K heads (groups x head_dim); V heads (groups x head_dim)]

The interleaved layout groups the rows by key/value head: for each of the
``groups`` KV heads, its ``heads / groups`` query heads, then its key head,
then its value head, i.e. rows ``[groups, heads/groups + 2, head_dim]``
flattened (with Megatron-core's ``attention_output_gate``, each group's query heads are followed by
their gate heads, ours being ``[Q; K; V; G]``). Megatron-LM and MindSpeed-LLM store ``linear_qkv`` this way (each TP
rank holds a contiguous run of groups); with ``groups == heads`` it is the
per-head ``[q, k, v]`` layout of GPT-NeoX's and Bloom's ``query_key_value``, and
with fewer groups Falcon's grouped QKV. Both functions act on the first
dimension only, so weights ``[rows, hidden]`` and biases ``[rows]`` alike.

    fused = interleaved_to_ours(megatron_qkv, heads=32, groups=8, head_dim=128)
    assert torch.equal(ours_to_interleaved(fused, 32, 8, 128), megatron_qkv)

CodeGen's ``qkv_proj`` is another fused layout: ``mp_num`` blocks, each holding a slice of the query,
value and key heads (:func:`blocked_to_ours`, :func:`ours_to_blocked`).
"""
from __future__ import annotations

from typing import Tuple

import torch


def _check(tensor: torch.Tensor, heads: int, groups: int, head_dim: int,
           gated: bool = False) -> Tuple[int, Tuple[int, ...]]:
    """(query heads per group, trailing shape); ValueError when the rows do not fit the head counts."""
    if groups < 1 or heads % groups:
        raise ValueError(f"fused QKV: {heads} query heads do not split into {groups} key/value groups")
    gate_heads = heads if gated else 0
    rows = (heads + gate_heads + 2 * groups) * head_dim
    if tensor.dim() < 1 or tensor.size(0) != rows:
        gates = " + the output gate's heads" if gated else ""
        raise ValueError(f"fused QKV has {tuple(tensor.shape)[:1]} rows, {heads} heads{gates} + 2 x {groups} groups "
                         f"of head_dim {head_dim} need {rows}")
    return heads // groups, tuple(tensor.shape[1:])


def interleaved_to_ours(tensor: torch.Tensor, heads: int, groups: int, head_dim: int,
                        gated: bool = False) -> torch.Tensor:
    """``[groups, q_per_group + 2, head_dim, ...]`` rows -> ``[Q; K; V]`` rows (a new tensor).

    ``gated``: the rows also hold a per-channel output gate (Megatron-core's ``attention_output_gate``): each
    group is ``[its queries; their gates; key; value]`` (``[groups, 2 q_per_group + 2, head_dim, ...]``) and
    ours ``[Q; K; V; G]``."""
    per_group, rest = _check(tensor, heads, groups, head_dim, gated)
    gate_heads = per_group if gated else 0
    grouped = tensor.reshape(groups, per_group + gate_heads + 2, head_dim, *rest)  # [g, q/g (+ q/g) + 2, hd, ...]
    query = grouped[:, :per_group].reshape(heads * head_dim, *rest)  # [heads * hd, ...]
    gate = grouped[:, per_group:per_group + gate_heads].reshape(gate_heads * groups * head_dim, *rest)
    key = grouped[:, per_group + gate_heads].reshape(groups * head_dim, *rest)  # [groups * hd, ...]
    value = grouped[:, per_group + gate_heads + 1].reshape(groups * head_dim, *rest)  # [groups * hd, ...]
    return torch.cat([query, key, value, gate], dim=0)


def ours_to_interleaved(tensor: torch.Tensor, heads: int, groups: int, head_dim: int,
                        gated: bool = False) -> torch.Tensor:
    """``[Q; K; V]`` rows -> ``[groups, q_per_group + 2, head_dim, ...]`` rows (a new tensor); ``gated``:
    ``[Q; K; V; G]`` -> ``[groups, 2 q_per_group + 2, head_dim, ...]`` (see :func:`interleaved_to_ours`)."""
    per_group, rest = _check(tensor, heads, groups, head_dim, gated)
    gate_rows = heads * head_dim if gated else 0
    query, key, value, gate = tensor.split([heads * head_dim, groups * head_dim, groups * head_dim, gate_rows],
                                           dim=0)
    grouped = torch.cat([query.reshape(groups, per_group, head_dim, *rest),  # [g, q/g, hd, ...]
                         gate.reshape(groups, per_group if gated else 0, head_dim, *rest),
                         key.reshape(groups, 1, head_dim, *rest),
                         value.reshape(groups, 1, head_dim, *rest)], dim=1)  # [g, q/g (+ q/g) + 2, hd, ...]
    return grouped.reshape(-1, *rest)


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
