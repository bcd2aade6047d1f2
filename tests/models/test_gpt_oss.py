"""GPT-OSS's pieces on their own: the clamped SwiGLU against transformers' formula, the interleaved gate/up
transform, and the one-line refusals of what the family cannot express.

    python -m pytest tests/models/test_gpt_oss.py -q
"""
from __future__ import annotations

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from core.transformer.mlp import activation_function, gated_activation
from mindspeed_llm.models.registry import TRANSFORMS, RegistryError, TensorContext, config_from_hf, get_family

SIZES = dict(vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2)


def test_clamped_swiglu_matches_transformers_experts() -> None:
    """Our [gate; up] halves through --quick-geglu/--activation-func-clamp-value/--glu-linear-offset give
    GptOssExperts' activation of the interleaved HF layout, with values on both sides of the clamp."""
    hf_config = transformers.GptOssConfig(**SIZES, swiglu_limit=0.5)
    experts = transformers.models.gpt_oss.modeling_gpt_oss.GptOssExperts(hf_config)
    interleaved = torch.randn(3, 5, 2 * 32, generator=torch.Generator().manual_seed(0)) * 2  # [.., 2 ffn]
    ours_layout = TRANSFORMS["experts_gate_up_interleaved"][0]([interleaved], TensorContext())  # [3, 2 ffn, ..]
    ours_layout = ours_layout.transpose(1, 2)  # back to [3, 5, 2 ffn] as [gate; up]
    config = config_from_hf(dict(hf_config.to_dict()), "gpt_oss")
    ours = gated_activation(ours_layout, activation_function(config), config)
    assert (interleaved[..., 0::2] > 0.5).any() and (interleaved[..., 1::2] < -0.5).any()
    torch.testing.assert_close(ours, experts._apply_gate(interleaved), rtol=0, atol=0)


def test_interleaved_gate_up_round_trips() -> None:
    to_ours, to_hf = TRANSFORMS["experts_gate_up_interleaved"]
    weight, bias = torch.randn(4, 64, 2 * 32), torch.randn(4, 2 * 32)  # HF [E, h, 2 ffn], [E, 2 ffn]
    ours = to_ours([weight], TensorContext())
    assert ours.shape == (4, 64, 64) and torch.equal(ours[:, :32], weight[:, :, 0::2].transpose(1, 2))
    assert torch.equal(to_hf(ours, TensorContext())[0], weight)
    assert torch.equal(to_hf(to_ours([bias], TensorContext()), TensorContext())[0], bias)


def test_config_maps_biases_and_activation() -> None:
    config = config_from_hf(dict(transformers.GptOssConfig(**SIZES).to_dict()), "gpt-oss")
    assert config.add_bias_linear and config.router_bias and config.mlp_bias and config.activation == "quick_geglu"
    assert (config.activation_func_clamp_value, config.glu_linear_offset, config.softmax_type) == (7.0, 1.0,
                                                                                                     "learnable")
    assert not config.yarn_correction_range_round_to_int and config.rope_scaling_type == "yarn"
    assert [config.layer_window(i) for i in range(2)] == [128, None]
    no_bias = config_from_hf(dict(transformers.GptOssConfig(**SIZES, attention_bias=False).to_dict()), "gpt_oss")
    assert not no_bias.qkv_bias and not no_bias.dense_bias(0) and no_bias.mlp_bias and no_bias.router_bias


@pytest.mark.parametrize("settings, message", [
    (dict(swiglu_alpha=1.5), "gpt_oss swiglu_alpha=1.5 is not supported (only quick GELU's 1.702)"),
    (dict(swiglu_limit=0.0), "gpt_oss swiglu_limit=0.0 is not supported"),
    (dict(quantization_config={"quant_method": "awq"}), "gpt_oss config.json has a quantization_config (quant_method "
                                                        "'awq') the converter does not dequantise"),
])
def test_unsupported_hf_settings_are_one_line(settings, message) -> None:
    hf = dict(transformers.GptOssConfig(**SIZES).to_dict(), **settings)
    with pytest.raises(RegistryError) as error:
        config_from_hf(hf, "gpt_oss")
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("changes, message", [
    (dict(softmax_type="vanilla"), "gpt_oss needs --softmax-type learnable"),
    (dict(glu_linear_offset=0.0), "gpt_oss needs the clamped SwiGLU"),
    (dict(add_bias_linear=False), "gpt_oss experts and router have biases"),
    (dict(add_bias_linear=False, add_mlp_bias=True, add_router_bias=True, add_qkv_bias=True),
     "gpt_oss has biases on all of q/k/v/o"),
    (dict(first_k_dense_replace=1), "gpt_oss cannot express first_k_dense_replace=1 (needs 0)"),
])
def test_settings_without_hf_equivalent_are_refused(changes, message) -> None:
    import dataclasses

    config = dataclasses.replace(config_from_hf(dict(transformers.GptOssConfig(**SIZES).to_dict()), "gpt_oss"),
                                 **changes)
    with pytest.raises(RegistryError) as error:
        get_family("gpt-oss").to_hf_config(config)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_dense_mlp_takes_the_clamped_swiglu() -> None:
    """The flags act on dense MLPs too: the MLP's output is fc2 of the clamped, offset GLU of fc1."""
    from core.models.gpt_model import layout_state
    from core.transformer.mlp import MLP

    config = TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=2, vocab_size=32, ffn_hidden_size=8,
                               activation="quick_geglu", activation_func_clamp_value=0.2, glu_linear_offset=1.0,
                               add_bias_linear=False)
    mlp = MLP(config, layout_state(1))
    torch.manual_seed(2)
    for param in mlp.parameters():
        torch.nn.init.normal_(param, std=0.5)
    x = torch.randn(3, 1, 16, generator=torch.Generator().manual_seed(1)) * 4
    gate, up = (x @ mlp.linear_fc1.weight.t()).chunk(2, dim=-1)
    gate, up = gate.clamp(max=0.2), up.clamp(-0.2, 0.2)
    expected = (gate * torch.sigmoid(1.702 * gate) * (up + 1.0)) @ mlp.linear_fc2.weight.t()
    torch.testing.assert_close(mlp(x), expected)


# openai/gpt-oss-20b config.json (as quoted verbatim in several public repositories), without its
# quantization_config: the bf16 copy the converter reads
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
    "initializer_range": 0.02, "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False,
    "pad_token_id": 199999, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "use_cache": True, "vocab_size": 201088}


def test_published_20b_config_maps_to_the_recipe_flags_and_back() -> None:
    config = config_from_hf(GPT_OSS_20B, "gpt-oss", tensor_model_parallel_size=8)
    assert (config.num_layers, config.hidden_size, config.kv_channels, config.num_query_groups) == (24, 2880, 64, 8)
    assert (config.num_experts, config.moe_router_topk, config.moe_expert_ffn_hidden_size) == (32, 4, 2880)
    assert (config.sliding_window, config.sliding_window_pattern, config.moe_aux_loss_coeff) == (128, 2, 0.9)
    assert (config.rotary_base, config.rope_scaling_factor, config.rope_original_max_position_embeddings) == (
        150000.0, 32.0, 4096)
    back = get_family("gpt_oss").to_hf_config(config, GPT_OSS_20B)
    for key in ("layer_types", "num_local_experts", "swiglu_limit", "attention_bias", "head_dim", "intermediate_size",
                "router_aux_loss_coef", "sliding_window", "initial_context_length"):
        assert back[key] == GPT_OSS_20B[key], key
    assert back["rope_scaling"] == {**GPT_OSS_20B["rope_scaling"]}


def test_variant_without_attention_bias_round_trips(tmp_path, monkeypatch) -> None:
    """HF -> TP2 PP2 -> HF of ``gpt_oss_no_attention_bias`` (the family's round trip covers the published
    layout): --add-mlp-bias/--add-router-bias come back as attention_bias false, plain RoPE as an explicit
    default ``rope_parameters`` (GptOssConfig reads none as YaRN), and the reloaded model's logits agree."""
    import tests.models.test_zoo_roundtrip as round_trip
    from tests.models.test_zoo_parity import CASES

    monkeypatch.setattr(round_trip, "case_for", CASES.__getitem__)
    round_trip.test_hf_tp2_pp2_hf_round_trip_is_exact("gpt_oss_no_attention_bias", tmp_path)
