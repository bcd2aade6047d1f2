"""Llama 4 text and Aria text map what their HF configs say and refuse, in one line naming the family and the
key, what the decoder cannot express.

    python -m pytest -q tests/models/test_moe_fused_experts_registry.py
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest

from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family

SIZES = dict(hidden_size=64, intermediate_size=32, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, vocab_size=128, max_position_embeddings=256)
LLAMA4 = dict(SIZES, model_type="llama4_text", num_local_experts=4, intermediate_size_mlp=64)
ARIA = dict(SIZES, model_type="aria_text", moe_num_experts=4, moe_topk=2)

BAD = [
    ("llama4", dict(LLAMA4, num_experts_per_tok=2), "num_experts_per_tok=2"),
    ("llama4", dict(LLAMA4, interleave_moe_layer_step=2), "moe_layers=[1, 3, 5, 7]"),
    ("llama4", dict(LLAMA4, moe_layers=[0, 1, 4]), "moe_layers=[0, 1, 4]"),
    ("llama4", dict(LLAMA4, attention_bias=True), "attention_bias=True"),
    ("llama4", dict(LLAMA4, attention_chunk_size=None, layer_types=["chunked_attention"] * 8), "attention_chunk_size"),
    ("aria_text", dict(ARIA, hidden_act="gelu"), "hidden_act='gelu'"),
    ("aria_text", dict(ARIA, mlp_bias=True), "mlp_bias=True"),
    ("aria_text", dict(ARIA, moe_num_shared_experts=0), "moe_num_shared_experts=0"),
    ("aria_text", dict(ARIA, moe_intermediate_size=16), "moe_intermediate_size=16"),
]


@pytest.mark.parametrize("family, hf, key", BAD, ids=[b[2] for b in BAD])
def test_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf(hf, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_llama4_defaults_follow_transformers() -> None:
    """Without the optional keys: every 4th layer NoPE and fully attending, the others chunked with q/k L2 norms,
    the NoPE layers' temperature, top-1 sigmoid routing on the expert input, base 500000."""
    config = config_from_hf(LLAMA4, "llama4")
    assert config.no_rope_layers == config.full_attention_layers == (3, 7)
    assert (config.attention_chunk_size, config.qk_norm, config.rope_interleaved) == (8192, "l2", True)
    assert (config.attn_temperature_beta, config.attn_temperature_length) == (0.1, 8192)
    assert config.attn_temperature_nope_layers and config.moe_apply_probs_on_input
    assert (config.moe_router_topk, config.moe_router_score_function, config.rotary_base) == (1, "sigmoid", 500000.0)
    assert (config.ffn_hidden_size, config.moe_expert_ffn_hidden_size, config.moe_shared_expert_intermediate_size,
            config.norm_epsilon) == (64, 32, 32, 1e-5)
    assert all(config.is_moe_layer(i) for i in range(8))


def test_llama4_layer_types_map_both_ways() -> None:
    """Explicit ``layer_types`` need not follow the NoPE layers: chunked and full layers come back as given."""
    types = ["chunked_attention", "full_attention"] * 4
    config = config_from_hf(dict(LLAMA4, attention_chunk_size=16, layer_types=types), "llama4")
    assert config.full_attention_layers == (1, 3, 5, 7) and config.no_rope_layers == (3, 7)
    assert get_family("llama4").to_hf_config(config)["layer_types"] == types


def test_llama4_moe_layers_map_to_first_k_and_freq() -> None:
    config = config_from_hf(dict(LLAMA4, moe_layers=[2, 4, 6]), "llama4")
    assert (config.first_k_dense_replace, config.moe_layer_freq) == (1, 2)
    assert get_family("llama4").to_hf_config(config)["moe_layers"] == [2, 4, 6]


def test_llama4_refuses_what_its_config_cannot_say() -> None:
    family, config = get_family("llama4"), config_from_hf(LLAMA4, "llama4")
    for change, key in ((dict(attn_temperature_nope_layers=False), "--attn-temperature-nope-layers"),
                        (dict(moe_shared_expert_intermediate_size=64), "moe_shared_expert_intermediate_size")):
        with pytest.raises(RegistryError, match="llama4") as error:
            family.to_hf_config(dataclasses.replace(config, **change))
        assert key in str(error.value)


def test_aria_shared_experts_are_n_times_the_expert_ffn() -> None:
    config = config_from_hf(dict(ARIA, moe_num_shared_experts=3), "aria_text")
    assert (config.moe_shared_expert_intermediate_size, config.moe_router_pre_softmax) == (96, False)
    assert get_family("aria_text").to_hf_config(config)["moe_num_shared_experts"] == 3
    with pytest.raises(RegistryError, match="aria_text needs shared experts of a multiple"):
        get_family("aria_text").to_hf_config(dataclasses.replace(config, moe_shared_expert_intermediate_size=48))
