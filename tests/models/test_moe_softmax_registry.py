"""Softmax-MoE families (``mindspeed_llm/models/families/moe_softmax.py``) refuse what they cannot express in
one line naming the family and key; JetMoE is refused as a whole; SparseMixer routing equals transformers'
PhiMoE router in eval mode; Qwen3Moe's leading dense layers map to --first-k-dense-replace.

    python -m pytest -q tests/models/test_moe_softmax_registry.py
"""
from __future__ import annotations

from typing import Any, Dict

import pytest
import torch
import transformers.models.phimoe.modeling_phimoe as phimoe

from core.transformer.moe.router import sparsemixer_route
from mindspeed_llm.models.registry import RegistryError, config_from_hf, family_for_hf_config, get_family

SIZES = dict(hidden_size=64, intermediate_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=128, max_position_embeddings=256)
DBRX = dict(model_type="dbrx", d_model=64, n_heads=4, n_layers=2, vocab_size=128, max_seq_len=256)
BAD = [
    ("hunyuan_v1_moe", dict(num_experts=[4, 4, 8], moe_topk=2), "num_experts=[4, 4, 8]"),
    ("hunyuan_v1_moe", dict(num_experts=4, moe_topk=2, num_shared_expert=[2, 2, 2]), "num_shared_expert"),
    ("hunyuan_v1_moe", dict(num_experts=4, moe_topk=2, moe_intermediate_size=16), "moe_intermediate_size"),
    ("hunyuan_v1_moe", dict(num_experts=4, moe_topk=2, use_cla=True), "use_cla"),
    ("hunyuan_v1_moe", dict(num_experts=4, moe_topk=2, rope_parameters={"rope_type": "linear", "factor": 2.0}),
     "rope_type 'linear'"),
    ("dbrx", dict(DBRX, ffn_config=dict(moe_normalize_expert_weights=2.0)), "moe_normalize_expert_weights=2.0"),
    ("dbrx", dict(DBRX, ffn_config=dict(moe_jitter_eps=0.01)), "moe_jitter_eps"),
    ("dbrx", dict(DBRX, attn_config=dict(rope_theta=500000.0), rope_parameters={"rope_theta": 10000.0}),
     "attn_config.rope_theta"),
    ("phimoe", dict(num_local_experts=4, num_experts_per_tok=3), "num_experts_per_tok=3"),
    ("phimoe", dict(num_local_experts=4, input_jitter_noise=0.01), "input_jitter_noise"),
    ("flex_olmo", dict(num_experts=4, attention_bias=True), "attention_bias"),
]


@pytest.mark.parametrize("family, hf, key", BAD, ids=[b[2] for b in BAD])
def test_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**SIZES, **hf}, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_jetmoe_is_refused_with_the_reason() -> None:
    for lookup in (lambda: get_family("jetmoe"), lambda: family_for_hf_config({"model_type": "jetmoe"})):
        with pytest.raises(RegistryError, match="jetmoe is not supported: its attention is a mixture of attention"):
            lookup()


def test_dbrx_reads_the_original_rope_theta_and_normalisation() -> None:
    config = config_from_hf({**DBRX, "attn_config": {"rope_theta": 500000.0, "clip_qkv": 8},
                             "ffn_config": {"moe_normalize_expert_weights": None, "moe_num_experts": 4,
                                            "moe_top_k": 2, "ffn_hidden_size": 32}}, "dbrx")
    assert (config.rotary_base, config.qkv_clip, config.norm_topk_prob, config.layernorm_bias) == \
        (500000.0, 8.0, False, False)


@pytest.mark.parametrize("eps", [0.0, 0.01, 0.3, 2.0])
def test_sparsemixer_matches_transformers_in_eval_mode(eps: float) -> None:
    logits = torch.randn(64, 8, generator=torch.Generator().manual_seed(0)) * 2.0  # [t, e]
    expected_weights, expected_indices = phimoe.sparsemixer(logits, jitter_eps=eps, training=False, top_k=2)
    weights, indices = sparsemixer_route(logits, 2, eps)
    assert torch.equal(indices, expected_indices)
    torch.testing.assert_close(weights, expected_weights, rtol=0, atol=1e-7)
    assert eps == 0.0 or (weights[:, 0] < 1).any()  # the eps widened some token's softmax


# --------------------------------------------------------------------------- Mixtral, Qwen-MoE, OLMoE

MIXTRAL_LAYOUT_SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=2, vocab_size=128, max_position_embeddings=256,
                            moe_intermediate_size=32, num_experts_per_tok=2)
MIXTRAL_LAYOUT_BAD = [
    ("mixtral", dict(model_type="mixtral", num_local_experts=4, router_jitter_noise=0.1), "router_jitter_noise"),
    ("qwen3_moe", dict(model_type="qwen3_moe", num_experts=4, decoder_sparse_step=2), "decoder_sparse_step=2"),
    ("qwen3_moe", dict(model_type="qwen3_moe", num_experts=4, mlp_only_layers=[1]), "mlp_only_layers=[1]"),
    ("qwen2_moe", dict(model_type="qwen2_moe", num_experts=4, shared_expert_intermediate_size=48,
                       use_sliding_window=True), "use_sliding_window"),
]


@pytest.mark.parametrize("family, hf, key", MIXTRAL_LAYOUT_BAD, ids=[b[2] for b in MIXTRAL_LAYOUT_BAD])
def test_mixtral_layout_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**MIXTRAL_LAYOUT_SIZES, **hf}, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_leading_dense_layers_map_to_first_k_dense_replace() -> None:
    config = config_from_hf({**MIXTRAL_LAYOUT_SIZES, "model_type": "qwen3_moe", "num_experts": 4,
                             "mlp_only_layers": [0, 1]}, "qwen3-moe")
    assert config.first_k_dense_replace == 2 and [config.is_moe_layer(i) for i in range(3)] == [False, False, True]
    assert (config.ffn_hidden_size, config.moe_ffn_hidden_size, config.moe_router_pre_softmax) == (128, 32, True)
