"""Registry details of the Llama-like families (``mindspeed_llm/models/families/llama_like.py``) that the
parity cases do not reach: EXAONE 4's layouts read from legacy keys as transformers reads them, GraniteSWA's RoPE
bases per layer type and its attention sinks, and the settings refused.

    python -m pytest tests/models/test_llama_like.py -q
"""
from __future__ import annotations

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, config_from_hf

SIZES = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)


def _windows(cfg: TransformerConfig) -> list:
    return ["full_attention" if cfg.layer_window(i) is None else "sliding_attention" for i in range(cfg.num_layers)]


def test_exaone4_int_pattern_follows_transformers_and_skips_rope_on_full_layers() -> None:
    hf = dict(SIZES, model_type="exaone4", sliding_window=16, sliding_window_pattern=4)
    ours = config_from_hf(hf, "exaone4")
    assert _windows(ours) == transformers.Exaone4Config(**SIZES, sliding_window=16, sliding_window_pattern=4).layer_types
    assert ours.no_rope_layers == ours.full_attention_layers == (3, 7)
    without_window = config_from_hf(dict(SIZES, model_type="exaone4", sliding_window=None), "exaone4")
    assert without_window.sliding_window is None and without_window.no_rope_layers == ()


def test_exaone4_string_pattern_needs_layer_types() -> None:
    with pytest.raises(RegistryError, match="exaone4 sliding_window_pattern 'LLLG'"):
        config_from_hf(dict(SIZES, model_type="exaone4", sliding_window=16, sliding_window_pattern="LLLG"), "exaone4")


def test_granite_swa_rope_bases_per_layer_type() -> None:
    types = ["full_attention", "sliding_attention"] * 4
    hf = dict(SIZES, model_type="granite_swa", layer_types=types, layer_rope_theta=[0, 50.0] * 4)
    ours = config_from_hf(hf, "granite_swa")
    assert ours.rotary_base == 50.0 and ours.local_rotary_base is None and ours.no_rope_layers == (0, 2, 4, 6)
    assert ours.full_attention_layers == (0, 2, 4, 6) and ours.softmax_type == "learnable"
    hf["layer_rope_theta"] = [10.0, 50.0, 20.0, 50.0] * 2
    with pytest.raises(RegistryError, match="more than one base per layer type"):
        config_from_hf(hf, "granite_swa")


def test_softmax_sink_adds_one_term_to_each_denominator() -> None:
    from core.transformer.attention import causal_mask, explicit_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))  # [b, n, s, hn]
    sink = torch.tensor([0.0, 1.5])  # off-by-one on head 0, a learnt logit on head 1
    out = explicit_attention(q, k, v, causal_mask(5, None, q.device), 0.5, None, sink, 0.0)
    scores = (q @ k.transpose(-1, -2) * 0.5).masked_fill(~causal_mask(5, None, q.device), float("-inf"))
    weights = scores.exp() / (scores.exp().sum(-1, keepdim=True) + sink.exp().view(1, 2, 1, 1))
    torch.testing.assert_close(out, weights @ v)
