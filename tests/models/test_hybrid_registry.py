"""The hybrid families of issue 27 in the registry: each is converted or refused in one line with its reason; the
paired families (an HF layer = two of our pattern letters) map HF layer j to our layers 2j and 2j + 1, read both
spellings of their layer kinds, and refuse on export what their config cannot say.

    python -m pytest -q tests/models/test_hybrid_registry.py
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
import transformers

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import RegistryError, config_from_hf, family_for_hf_config, find_rule, get_family

# the model types the issue names, as transformers 5.24 spells them
HYBRID_MODEL_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "qwen4_exp_text", "kimi_linear", "nemotron_h",
                      "falcon_h1", "bamba", "jamba", "zamba", "zamba2", "granitemoehybrid", "olmo_hybrid",
                      "bailing_hybrid", "minimax", "lfm2", "lfm2_moe", "lfm3", "recurrent_gemma", "rwkv", "xlstm")
SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=128, mamba_n_heads=8, mamba_d_head=16, mamba_d_state=8)


@pytest.mark.parametrize("model_type", HYBRID_MODEL_TYPES)
def test_every_hybrid_family_converts_or_says_why_not(model_type: str) -> None:
    try:
        family = family_for_hf_config({"model_type": model_type})
    except RegistryError as error:
        assert f"{model_type} is not supported: " in str(error) and len(str(error)) > 60, str(error)
        assert "\n" not in str(error)
    else:
        assert family.model_type == model_type


def test_paired_rules_map_hf_layer_j_to_our_layers_2j_and_2j_plus_1() -> None:
    rules = get_family("bamba").weights
    assert find_rule(rules, "decoder.layers.4.mixer.A_log")[1] == ("model.layers.2.mamba.A_log",)
    mlp = "model.layers.2.feed_forward.down_proj.weight"
    assert find_rule(rules, "decoder.layers.5.mlp.linear_fc2.weight")[1] == (mlp,)
    assert find_rule(rules, "decoder.layers.5.pre_mlp_layernorm.weight")[1] == ("model.layers.2.pre_ff_layernorm.weight",)
    with pytest.raises(RegistryError, match="no weight rule"):  # a mixer tensor never sits in an MLP layer
        find_rule(rules, "decoder.layers.5.mixer.A_log")


def test_layer_kinds_read_in_every_spelling() -> None:
    bamba = config_from_hf({**SIZES, "model_type": "bamba", "attn_layer_indices": [1, 3]}, "bamba")
    assert bamba.hybrid_override_pattern == "M-*-M-*-" and bamba.num_layers == 8 and bamba.rotary_percent == 0.5
    granite = dict(SIZES, model_type="granitemoehybrid", num_local_experts=4, position_embedding_type="nope")
    legacy = config_from_hf({**granite, "layer_types": ["mamba", "attention", "mamba", "mamba"]}, "granitemoehybrid")
    today = config_from_hf({**granite, "layer_types": ["linear_attention", "full_attention", "linear_attention",
                                                       "linear_attention"]}, "granitemoehybrid")
    assert legacy == today and legacy.hybrid_override_pattern == "ME*EMEME"
    assert legacy.position_embedding_type == "none" and legacy.moe_shared_expert_intermediate_size == 1024
    jamba = transformers.JambaConfig(**{key: value for key, value in SIZES.items() if not key.startswith("mamba_n")},
                                     attn_layer_period=2, attn_layer_offset=1, expert_layer_period=4,
                                     expert_layer_offset=2, num_experts=4).to_dict()
    cfg = config_from_hf(jamba, "jamba")
    assert cfg.hybrid_override_pattern == "M-*-ME*-" and cfg.mamba_version == 1
    assert cfg.mamba_mixer_rms_weights and cfg.mamba_mixer_rms_eps == jamba["rms_norm_eps"]


def _jamba(pattern: str) -> TransformerConfig:
    hf = transformers.JambaConfig(**{key: value for key, value in SIZES.items() if not key.startswith("mamba_n")},
                                  num_experts=4).to_dict()
    return dataclasses.replace(config_from_hf(hf, "jamba"), hybrid_override_pattern=pattern,
                               num_layers=len(pattern))


def test_exports_refuse_what_the_family_cannot_say() -> None:
    with pytest.raises(RegistryError, match=r"attention layers every n-th HF layer.*\[0, 1, 3\]"):
        get_family("jamba").to_hf_config(_jamba("*-*-M-*-"))  # attention at HF layers 0, 1 and 3: no period
    assert get_family("jamba").to_hf_config(_jamba("M-*EM-*E"))["attn_layer_period"] == 2
    granite = config_from_hf({**SIZES, "model_type": "granitemoehybrid", "num_local_experts": 0,
                              "layer_types": ["mamba"] * 4}, "granitemoehybrid")
    with pytest.raises(RegistryError, match="pairs"):
        get_family("granitemoehybrid").to_hf_config(dataclasses.replace(granite, hybrid_override_pattern="MM--M-M-"))


def test_bad_hf_configs_are_refused_in_one_line() -> None:
    with pytest.raises(RegistryError, match="bamba z_loss_coefficient=0.1"):
        config_from_hf({**SIZES, "model_type": "bamba", "z_loss_coefficient": 0.1}, "bamba")
    with pytest.raises(RegistryError, match="granitemoehybrid mamba_proj_bias=True"):
        config_from_hf({**SIZES, "model_type": "granitemoehybrid", "mamba_proj_bias": True}, "granitemoehybrid")
    with pytest.raises(RegistryError, match="layer_types"):
        config_from_hf({**SIZES, "model_type": "granitemoehybrid", "layer_types": ["mamba", "mlp", "mamba", "mamba"]},
                       "granitemoehybrid")
    with pytest.raises(ValueError, match="--mamba-mixer-rms-weights .* add --mamba-mixer-rms-eps"):
        TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, vocab_size=128,
                          hybrid_override_pattern="M-", position_embedding_type="none", mamba_version=1,
                          mamba_mixer_rms_weights=True)


def test_mamba_num_heads_sets_the_mixer_width() -> None:
    """--mamba-num-heads (Megatron-core's): d_inner = heads x head dim, not expand x hidden; Nemotron-H channels
    that are no multiple of the width convert to it and back."""
    from core.models.gpt_model import build_model, layout_state

    cfg = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, vocab_size=128,
                            hybrid_override_pattern="M", position_embedding_type="none", mamba_heads=6,
                            mamba_head_dim=16, mamba_num_groups=1, mamba_state_dim=8)
    assert cfg.mamba_d_inner == 96 and cfg.mamba_num_heads == 6
    mixer = build_model(cfg, layout_state(1), torch.device("cpu"), seed=0).decoder.layers["0"].mixer
    assert mixer.in_proj.weight.shape[0] == 2 * 96 + 2 * 8 + 6 and mixer.out_proj.weight.shape == (64, 96)
    hf = transformers.NemotronHConfig(**{**SIZES, "num_hidden_layers": 1}, layers_block_type=["mamba"],
                                      mamba_num_heads=6, mamba_head_dim=16, n_groups=1).to_dict()
    converted = config_from_hf(hf, "nemotron_h")
    assert converted.mamba_heads == 6 and get_family("nemotron_h").to_hf_config(converted)["mamba_num_heads"] == 6
