"""ALiBi (``core/transformer/alibi.py``): the slopes against transformers' Bloom and MPT, and the attention
against an explicit per-head loop (causal, sliding window, softcapped; the heads of a TP rank).

    python -m pytest tests/unit/test_alibi.py -q
"""
from __future__ import annotations

import math
from typing import Optional

import pytest
import torch

from core.models.gpt_model import layout_state
from core.transformer.alibi import alibi_slopes
from core.transformer.attention import SelfAttention
from core.transformer.config import TransformerConfig


@pytest.mark.parametrize("heads", [1, 3, 4, 6, 12, 16, 20, 32, 112])
def test_slopes_are_bloom_and_mpt(heads: int) -> None:
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    ours = alibi_slopes(heads)
    assert torch.allclose(ours, _get_alibi_slopes(heads, torch.device("cpu")), rtol=1e-6, atol=0)
    mpt = -build_mpt_alibi_tensor(heads, 2, alibi_bias_max=8)[:, 0, 0]  # position -1: minus the slope
    assert torch.equal(ours, mpt)
    mpt4 = -build_mpt_alibi_tensor(heads, 2, alibi_bias_max=4)[:, 0, 0]
    assert torch.equal(alibi_slopes(heads, bias_max=4.0), mpt4)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor, scale: float,
                        window: Optional[int], softcap: Optional[float]) -> torch.Tensor:
    """Head by head and query by query: scores, optional cap, + slope * key position, masked softmax."""
    b, n, s, hn = q.shape
    out = torch.zeros_like(q)
    for head in range(n):
        for i in range(s):
            keys = [j for j in range(s) if j <= i and (window is None or j > i - window)]
            scores = (q[:, head, i:i + 1] @ k[:, head, keys].transpose(-1, -2)).squeeze(1) * scale  # [b, keys]
            if softcap is not None:
                scores = torch.tanh(scores / softcap) * softcap
            scores = scores + slopes[head] * torch.tensor(keys, dtype=torch.float32)
            out[:, head, i] = (torch.softmax(scores, dim=-1).unsqueeze(1) @ v[:, head, keys]).squeeze(1)
    return out


@pytest.mark.parametrize("window, softcap", [(None, None), (3, None), (None, 2.0), (4, 2.0)])
@pytest.mark.parametrize("tp_rank", [0, 1])
def test_attention_adds_each_local_heads_bias(window: Optional[int], softcap: Optional[float], tp_rank: int) -> None:
    heads, tp, seq, hn = 6, 2, 7, 4
    config = TransformerConfig(num_layers=1, hidden_size=heads * hn, num_attention_heads=heads, vocab_size=16,
                               position_embedding_type="alibi", alibi_bias_max=6.0, sliding_window=window,
                               attn_logit_softcapping=softcap, attention_dropout=0.0, tensor_model_parallel_size=tp)
    attention = SelfAttention(config, layout_state(tp, tp_rank)).eval()
    local = heads // tp
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(seq, 2, local, hn, generator=generator) for _ in range(3))  # [s, b, np, hn]
    out = attention._core_attention(q, k, v).view(seq, 2, local, hn).permute(1, 2, 0, 3)  # [b, np, s, hn]
    slopes = alibi_slopes(heads, 6.0)[tp_rank * local:(tp_rank + 1) * local]
    expected = reference_attention(*(t.permute(1, 2, 0, 3) for t in (q, k, v)), slopes, 1 / math.sqrt(hn),
                                   window, softcap)
    assert (out - expected).abs().max().item() < 1e-5
