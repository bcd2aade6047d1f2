"""Causal self-attention with MHA/GQA/MQA heads split over tensor parallelism.

The fused QKV weight is ``[Q heads; K heads; V heads]`` (each a
:class:`Segment` of heads). Query heads split over TP; key/value heads split
too, or are replicated when TP exceeds their number (each rank then holds the
one KV head its query heads use). The attention kernel is PyTorch's
``scaled_dot_product_attention``, which picks a flash kernel when one exists.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import checkpoint, inside_checkpoint
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, Segment
from core.tensor_parallel.random import get_rng_tracker
from core.transformer.config import TransformerConfig
from core.transformer.rope import apply_rotary


def sliding_window_mask(seq_len: int, window: Optional[int], device: torch.device) -> Optional[torch.Tensor]:
    """Boolean ``[s, s]`` mask (True = attend) letting query i see keys ``i - window < j <= i``.

    None when the window covers the whole sequence: plain causal attention (and its flash kernel).
    """
    if window is None or window >= seq_len:
        return None
    query = torch.arange(seq_len, device=device)[:, None]
    key = torch.arange(seq_len, device=device)[None, :]
    return (key <= query) & (key > query - window)


class SelfAttention(nn.Module):
    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        tp_group = state.tp_group
        self.config = config
        tp = tp_group.size
        hn = config.kv_channels
        heads, groups = config.num_attention_heads, config.num_key_value_heads
        self.local_heads = heads // tp
        self.local_groups = max(groups // tp, 1)
        self.head_dim = hn
        qkv_segments = (Segment(heads, hn), Segment(groups, hn), Segment(groups, hn))
        self.linear_qkv = ColumnParallelLinear(
            config.hidden_size, (heads + 2 * groups) * hn, group=tp_group,
            bias=config.add_bias_linear or config.add_qkv_bias, sequence_parallel=config.sequence_parallel,
            segments=qkv_segments, dtype=config.params_dtype)
        self.linear_proj = RowParallelLinear(
            heads * hn, config.hidden_size, group=tp_group, bias=config.add_bias_linear,
            sequence_parallel=config.sequence_parallel, segments=(Segment(heads, hn),), dtype=config.params_dtype)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple]) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism)
        qkv = self.linear_qkv(hidden)  # [s, b, (np + 2 ng) hn] local heads
        s, b = qkv.shape[:2]
        hn, nq, nkv = self.head_dim, self.local_heads, self.local_groups
        q, k, v = qkv.split([nq * hn, nkv * hn, nkv * hn], dim=-1)
        q = q.view(s, b, nq, hn)
        k = k.view(s, b, nkv, hn)
        v = v.view(s, b, nkv, hn)
        if rotary is not None:
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if self._recompute_core_attention():  # selective recompute: softmax(QK^T)V and its dropout
            context = checkpoint(self._core_attention, q, k, v)  # [s, b, np * hn]
        else:
            context = self._core_attention(q, k, v)
        return self.linear_proj(context)  # [s, b, h] ([s/tp, b, h] under SP)

    def _recompute_core_attention(self) -> bool:
        return (self.config.recompute_granularity == "selective" and self.training and torch.is_grad_enabled()
                and not inside_checkpoint())

    def _core_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s, b, nq, hn = q.shape
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, hn]
        if k.size(1) != nq:  # grouped-query attention: each KV head serves nq / nkv query heads
            repeat = nq // k.size(1)
            k = k.repeat_interleave(repeat, dim=1)
            v = v.repeat_interleave(repeat, dim=1)
        dropout = self.config.attention_dropout if self.training else 0.0
        mask = sliding_window_mask(s, self.config.sliding_window, q.device)
        causal = dict(is_causal=True) if mask is None else dict(attn_mask=mask)
        if dropout > 0:
            with get_rng_tracker().fork():  # heads differ per TP rank, so does their dropout
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, **causal)
        else:
            out = F.scaled_dot_product_attention(q, k, v, **causal)  # [b, np, s, hn]
        return out.permute(2, 0, 1, 3).reshape(s, b, nq * hn)
