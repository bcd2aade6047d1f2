"""The MLA MoE families (DeepSeek-V2/V3, Glm4MoeLite, Mistral4): routing maps, and one-line refusals of the
HF settings they cannot express (naming the family and the key).

    python -m pytest -q tests/models/test_mla_moe_registry.py
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest
import torch

from core.transformer.moe.router import group_limited_topk
from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family

SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, vocab_size=128,
             max_position_embeddings=256, kv_lora_rank=24, q_lora_rank=20, qk_nope_head_dim=12, qk_rope_head_dim=8,
             v_head_dim=10, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
             rms_norm_eps=1e-6)
BAD = [
    ("deepseek_v2", dict(topk_method="noaux_tc"), "topk_method='noaux_tc'"),
    ("deepseek_v2", dict(norm_topk_prob=True), "norm_topk_prob=True"),
    ("deepseek_v2", dict(moe_layer_freq=2), "moe_layer_freq=2"),
    ("deepseek_v2", dict(scoring_func="sigmoid"), "scoring_func='sigmoid'"),
    ("deepseek_v3", dict(scoring_func="softmax"), "scoring_func='softmax'"),
    ("deepseek_v3", dict(n_group=1, topk_group=2), "topk_group=2"),
    ("deepseek_v3", dict(num_key_value_heads=2), "num_key_value_heads=2"),
    ("glm4_moe_lite", dict(mlp_layer_types=["sparse", "dense", "sparse"]), "mlp_layer_types"),
    ("glm4_moe_lite", dict(first_k_dense_replace=2), "first_k_dense_replace=2"),
    ("glm4_moe_lite", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}),
     "partial_rotary_factor=0.5"),
    ("mistral4", dict(rope_parameters={"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0}),
     "partial_rotary_factor=1.0"),
]


@pytest.mark.parametrize("family, hf, key", BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**SIZES, "model_type": family, **hf}, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_deepseek_v2_group_limited_greedy_scores_a_group_by_its_best_expert() -> None:
    config = config_from_hf({**SIZES, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
                             "first_k_dense_replace": 1, "routed_scaling_factor": 16.0, "n_shared_experts": 2},
                            "deepseek2-lite")
    assert (config.moe_router_num_groups, config.moe_router_group_topk, config.moe_router_group_score_topk) == (4, 2, 1)
    assert config.moe_router_pre_softmax and not config.norm_topk_prob and config.rope_interleaved
    assert (config.first_k_dense_replace, config.moe_router_topk_scaling_factor,
            config.moe_shared_expert_intermediate_size) == (1, 16.0, 64)


def test_sigmoid_families_route_with_the_expert_bias_and_top2_groups() -> None:
    config = config_from_hf({**SIZES, "n_group": 4, "topk_group": 2, "aux_loss_alpha": 0.001, "seq_aux": True,
                             "num_nextn_predict_layers": 1}, "deepseek3")
    assert (config.moe_router_score_function, config.moe_router_enable_expert_bias, config.norm_topk_prob) == \
        ("sigmoid", True, True)
    assert (config.moe_router_group_score_topk, config.first_k_dense_replace, config.moe_router_topk_scaling_factor) \
        == (2, 3, 2.5)  # transformers' DeepseekV3 defaults for the keys left out
    assert (config.moe_aux_loss_coeff, config.moe_router_load_balancing_type) == (0.001, "seq_aux_loss")
    hf = get_family("deepseek_v3").to_hf_config(config, {"num_nextn_predict_layers": 1})
    assert hf["num_nextn_predict_layers"] == 1 and hf["n_group"] == 4 and hf["topk_method"] == "noaux_tc"
    with pytest.raises(RegistryError, match="deepseek_v3 scores a group by the sum of its best 2"):
        get_family("deepseek_v3").to_hf_config(dataclasses.replace(config, moe_router_group_score_topk=1))
    with pytest.raises(RegistryError, match=r"deepseek_v3 cannot express moe_router_enable_expert_bias=False "
                                            r"\(needs True\): it needs --moe-router-score-function sigmoid"):
        get_family("deepseek_v3").to_hf_config(dataclasses.replace(config, moe_router_enable_expert_bias=False))
    glm = config_from_hf({**SIZES, "mlp_layer_types": ["dense", "dense", "sparse"], "rms_norm_eps": 1e-5},
                         "glm4_moe_lite")
    assert glm.first_k_dense_replace == 2 and glm.moe_router_num_groups is None
    assert (glm.norm_epsilon, glm.mla_latent_norm_epsilon) == (1e-5, 1e-6)  # HF's latent norms keep 1e-6
    assert get_family("glm4_moe_lite").to_hf_config(glm)["mlp_layer_types"] == ["dense", "dense", "sparse"]


def test_mistral4_partial_rope_and_query_temperature() -> None:
    config = config_from_hf(SIZES, "mistral4")  # transformers' default RoPE: YaRN with llama_4_scaling_beta 0.1
    assert (config.rope_scaling_type, config.rope_scaling_factor, config.rotary_percent) == ("yarn", 128.0, 1.0)
    assert (config.attn_temperature_beta, config.attn_temperature_length) == (0.1, 8192)
    rope = get_family("mistral4").to_hf_config(config)["rope_parameters"]
    assert (rope["llama_4_scaling_beta"], rope["original_max_position_embeddings"], rope["partial_rotary_factor"]) \
        == (0.1, 8192, 0.4)
    with pytest.raises(RegistryError, match="mistral4 reads one original_max_position_embeddings"):
        get_family("mistral4").to_hf_config(dataclasses.replace(config, attn_temperature_length=4096))


def test_group_score_sums_the_chosen_number_of_best_experts() -> None:
    # groups of two: [0.5, 0.45] (max 0.5, top-2 sum 0.95) and [0.6, 0.1] (max 0.6, top-2 sum 0.7)
    scores = torch.tensor([[0.5, 0.45, 0.6, 0.1]])
    by_max = group_limited_topk(scores, topk=1, num_groups=2, group_topk=1, group_score_topk=1)
    by_sum = group_limited_topk(scores, topk=1, num_groups=2, group_topk=1, group_score_topk=2)
    assert by_max.tolist() == [[2]] and by_sum.tolist() == [[0]]
    assert group_limited_topk(scores, topk=1, num_groups=2, group_topk=1).tolist() == [[2]]  # topk/group_topk = 1
