"""Lightning attention (MiniMax): the chunked form equals the recurrence and transformers' slopes, forward and
backward; a sequence cut in two with the state passed on equals the whole; bad sizes and MiniMax configs the
decoder cannot express are refused in one line.

    python -m pytest -q tests/unit/test_lightning_attention.py
"""
from __future__ import annotations

import pytest
import torch
import transformers
from transformers.models.minimax.modeling_minimax import MiniMaxLightningAttention

from core.transformer.config import TransformerConfig
from core.transformer.lightning_attention import (lightning_attention_chunked, lightning_attention_recurrent,
                                                  lightning_slopes)
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family

HEADS, DIM, SEQ = 3, 8, 23


def _inputs(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(2, SEQ, HEADS, DIM, generator=generator, requires_grad=True) for _ in range(3)]


@pytest.mark.parametrize("chunk", [1, 4, 7, 64])
def test_chunked_equals_the_recurrence_forward_and_backward(chunk: int) -> None:
    slopes = lightning_slopes(HEADS, 1, 4)
    q, k, v = _inputs()
    weight = torch.randn(2, SEQ, HEADS, DIM, generator=torch.Generator().manual_seed(5))  # a loss over o
    out, state = lightning_attention_recurrent(q, k, v, slopes)
    grads = torch.autograd.grad((out * weight).sum() + state.sum(), (q, k, v))
    q2, k2, v2 = _inputs()
    out2, state2 = lightning_attention_chunked(q2, k2, v2, slopes, chunk)
    torch.testing.assert_close(out2, out, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(state2, state, rtol=1e-5, atol=1e-4)
    grads2 = torch.autograd.grad((out2 * weight).sum() + state2.sum(), (q2, k2, v2))
    for ours, expected in zip(grads2, grads):
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-4)


def test_two_pieces_with_the_state_passed_equal_the_whole() -> None:
    slopes = lightning_slopes(HEADS, 0, 2)
    q, k, v = (x.detach() for x in _inputs(1))
    whole, final = lightning_attention_chunked(q, k, v, slopes, 4)
    first, carried = lightning_attention_chunked(q[:, :9], k[:, :9], v[:, :9], slopes, 4)
    second, final2 = lightning_attention_chunked(q[:, 9:], k[:, 9:], v[:, 9:], slopes, 4, carried)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final2, final, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer, layers", [(0, 4), (3, 4), (2, 7)])
def test_slopes_are_transformers_ones(layer: int, layers: int) -> None:
    config = transformers.MiniMaxConfig(hidden_size=32, num_attention_heads=HEADS + 1, head_dim=8,
                                        num_hidden_layers=layers)
    expected = MiniMaxLightningAttention(config, layer).get_slope_rate().flatten()
    assert torch.equal(lightning_slopes(HEADS + 1, layer, layers), expected)


BASE = dict(num_layers=2, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32, vocab_size=8,
            experimental_attention_variant="lightning", linear_attention_freq="[1,0]", linear_num_key_heads=4,
            linear_num_value_heads=4, linear_key_head_dim=4, linear_value_head_dim=4)


@pytest.mark.parametrize("overrides, message", [
    (dict(linear_num_key_heads=2), "lightning-attention layers have one head count and head dim"),
    (dict(linear_value_head_dim=8), "lightning-attention layers have one head count and head dim"),
    (dict(parallel_residual=True, apply_residual_connection_post_layernorm=True), "--parallel-residual adds both"),
    (dict(parallel_residual=True, residual_alpha=2.0), "--parallel-residual adds both"),
    (dict(post_norm_only=True, apply_residual_connection_post_layernorm=True), "--post-norm-only drops"),
])
def test_bad_settings_are_one_line(overrides, message) -> None:
    with pytest.raises(ValueError, match=message) as error:
        TransformerConfig(**{**BASE, **overrides})
    assert "\n" not in str(error.value)


def test_pattern_letter_places_lightning_layers() -> None:
    config = TransformerConfig(**{**BASE, "experimental_attention_variant": None, "linear_attention_freq": None,
                                  "hybrid_override_pattern": "L*"})
    assert config.layer_parts(0) == ("lightning_attention", None) and config.has_linear_attention_layers


HF = dict(model_type="minimax", hidden_size=32, intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
          num_key_value_heads=2, head_dim=8, vocab_size=64, num_local_experts=4, num_experts_per_tok=2, block_size=4,
          layer_types=["linear_attention", "full_attention"])


def test_minimax_config_maps_factors_sizes_and_chunk() -> None:
    factors = {f"{kind}_{which}_factor": value for kind in ("full_attn", "linear_attn", "mlp")
               for which, value in (("alpha", 3.5), ("beta", 1.0))}
    cfg = config_from_hf({**HF, **factors}, "minimax")
    assert cfg.apply_residual_connection_post_layernorm and cfg.residual_alpha == 3.5
    assert cfg.residual_multiplier is None and cfg.linear_chunk_size == 4
    assert cfg.layer_parts(0)[0] == "lightning_attention" and cfg.layer_parts(1)[0] == "attention"
    assert (cfg.linear_num_value_heads, cfg.linear_value_head_dim) == (4, 8)
    out = get_family("minimax").to_hf_config_fn(cfg)
    assert out["mlp_alpha_factor"] == 3.5 and out["linear_attn_beta_factor"] == 1.0 and out["block_size"] == 4
    assert out["layer_types"] == ["linear_attention", "full_attention"]


@pytest.mark.parametrize("overrides, message", [
    (dict(mlp_alpha_factor=2.0), "differ; the decoder has one residual alpha"),
    (dict(full_attn_beta_factor=0.5), "differ; the decoder has one residual beta"),
    (dict(hidden_act="gelu"), "activate q, k and v by SiLU"),
    (dict(router_jitter_noise=0.1), "router_jitter_noise"),
])
def test_minimax_configs_the_decoder_cannot_build_are_refused(overrides, message) -> None:
    with pytest.raises(RegistryError, match=message) as error:
        config_from_hf({**HF, **overrides}, "minimax")
    assert "\n" not in str(error.value)


def test_minimax_export_needs_post_norm_residuals() -> None:
    import dataclasses
    cfg = dataclasses.replace(config_from_hf(HF, "minimax"), apply_residual_connection_post_layernorm=False)
    with pytest.raises(RegistryError, match="apply_residual_connection_post_layernorm"):
        get_family("minimax").to_hf_config_fn(cfg)


def test_megatron_args_carry_post_layernorm_residuals_both_ways() -> None:
    """Megatron-LM's --apply-residual-connection-post-layernorm means ours: read and written under its name; the
    residual alpha, which Megatron lacks, is refused on export."""
    from argparse import Namespace

    from mindspeed_llm.models.megatron_format import MegatronFormatError, args_from_config, config_from_args

    base = dict(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=64, normalization="RMSNorm")
    for flag in (True, False):
        args = args_from_config(TransformerConfig(**base, apply_residual_connection_post_layernorm=flag))
        assert args["apply_residual_connection_post_layernorm"] is flag
        read = TransformerConfig(**config_from_args(Namespace(**args)))
        assert read.apply_residual_connection_post_layernorm is flag
    weighed = TransformerConfig(**base, apply_residual_connection_post_layernorm=True, residual_alpha=2.0)
    with pytest.raises(MegatronFormatError, match="residual_alpha = 2.0"):
        args_from_config(weighed)


def test_dispatch_takes_fla_simple_gla_when_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without fla: the chunked reference. With a stand-in ``fla.ops.simple_gla``: on fla's device type, bf16
    inputs go to ``chunk_simple_gla`` with the per-head log decay -lambda, no query scaling, the state in fla's
    [b, h, dk, dv] layout and asked for, and come back as the reference gives them; fp32 keeps the reference."""
    import sys
    import types

    from core.transformer import lightning_attention as lightning

    assert lightning.lightning_attention_kernel("cpu")[0] == "chunked"
    calls = []

    def fake_chunk(q, k, v, g_gamma, scale, initial_state, output_final_state):
        calls.append((q.dtype, g_gamma.dtype, scale, None if initial_state is None else initial_state.shape,
                      output_final_state))
        slopes = -g_gamma
        start = None if initial_state is None else initial_state.transpose(-1, -2)
        out, state = lightning_attention_recurrent(q, k, v, slopes, start)
        return out, state.transpose(-1, -2)  # fla's layout

    module = types.ModuleType("fla.ops.simple_gla")
    module.chunk_simple_gla = fake_chunk
    for name in ("fla", "fla.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "fla.ops.simple_gla", module)
    lightning.lightning_attention_kernel.cache_clear()
    try:
        fla_device = next(iter(lightning.LIGHTNING.kernels))
        name, kernel = lightning.lightning_attention_kernel(fla_device)
        assert name == "fla" and lightning.lightning_attention_kernel("cpu")[0] == "chunked"
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 7, 3, 4, generator=generator) * 0.5 for _ in range(3))
        slopes, start = torch.tensor([0.1, 0.5, 1.0]), torch.randn(2, 3, 4, 4, generator=generator)
        kernel(q, k, v, slopes, 4, start)  # fp32: the reference, fla not called
        assert calls == []
        half = [t.to(torch.bfloat16) for t in (q, k, v)]
        out, state = kernel(*half, slopes, 4, start)
        expected_out, expected_state = lightning_attention_recurrent(*half, slopes, start)
        torch.testing.assert_close(out, expected_out)
        torch.testing.assert_close(state, expected_state)
        assert calls == [(torch.bfloat16, torch.float32, 1.0, (2, 3, 4, 4), True)]
    finally:
        lightning.lightning_attention_kernel.cache_clear()
