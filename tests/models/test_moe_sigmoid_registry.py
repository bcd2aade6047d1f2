"""Sigmoid / expert-bias MoE families: their routing settings map to our flags (a group scored by its best two,
as HF scores it), and the HF settings they cannot express are refused in one line naming the family and key.

    python -m pytest -q tests/models/test_moe_sigmoid_registry.py
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest

from mindspeed_llm.models.registry import RegistryError, config_from_hf, get_family

SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=128, max_position_embeddings=256, moe_intermediate_size=32, num_experts_per_tok=2,
             head_dim=16)
GLM = dict(model_type="glm4_moe", n_routed_experts=8, n_shared_experts=1)
ERNIE = dict(model_type="ernie4_5_moe", moe_num_experts=4, moe_k=2, moe_num_shared_experts=0)
MINIMAX = dict(model_type="minimax_m2", num_local_experts=4)
HY = dict(model_type="hy_v3", num_experts=4, num_shared_experts=1)
BAD = [
    ("glm4_moe", dict(GLM, n_group=2, topk_group=4), "topk_group=4"),
    ("glm4_moe", dict(GLM, n_shared_experts=0), "n_shared_experts=0"),
    ("ernie4_5_moe", dict(ERNIE, moe_layer_interval=2), "moe_layer_interval=2"),
    ("ernie4_5_moe", dict(ERNIE, moe_layer_end_index=1), "moe_layer_end_index=1"),
    ("ernie4_5_moe", dict(ERNIE, moe_layer_start_index=[1, 1]), "moe_layer_start_index=[1, 1]"),
    ("ernie4_5_moe", dict(ERNIE, use_bias=True), "use_bias=True"),
    ("ernie4_5_moe", dict(ERNIE, moe_norm_min=0.1), "moe_norm_min=0.1"),
    ("ernie4_5_moe", dict(ERNIE, moe_gate_act="sigmoid"), "moe_gate_act='sigmoid'"),
    ("minimax_m2", dict(MINIMAX, scoring_func="softmax"), "scoring_func='softmax'"),
    ("minimax_m2", dict(MINIMAX, router_jitter_noise=0.1), "router_jitter_noise"),
    ("minimax_m2", dict(MINIMAX, routed_scaling_factor=2.0), "routed_scaling_factor=2.0"),
    ("minimax_m2", dict(MINIMAX, attn_type_list=[0, 1, 1]), "attn_type_list"),
    ("hy_v3", dict(HY, mlp_layer_types=["sparse", "dense", "sparse"]), "mlp_layer_types"),
    ("hy_v3", dict(HY, mlp_bias=True), "mlp_bias=True"),
    ("hy_v3", dict(HY, num_shared_experts=0), "num_shared_experts=0"),
]


@pytest.mark.parametrize("family, hf, key", BAD, ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**SIZES, **hf}, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_group_limited_routing_maps_where_the_group_scores_agree() -> None:
    config = config_from_hf({**SIZES, **GLM, "n_group": 4, "topk_group": 2, "num_experts_per_tok": 4,
                             "routed_scaling_factor": 2.5}, "glm45")
    assert (config.moe_router_num_groups, config.moe_router_group_topk, config.moe_router_group_score_topk) == (4, 2, 2)
    assert (config.moe_router_score_function, config.moe_router_enable_expert_bias) == ("sigmoid", True)
    assert config.moe_router_topk_scaling_factor == 2.5 and config.moe_shared_expert_intermediate_size == 32
    assert config.first_k_dense_replace == 1 and config.rotary_percent == 0.5  # Glm4MoeConfig's defaults


def test_group_score_is_hf_best_two_whatever_topk() -> None:
    # HF sums a group's best 2 scores; without --moe-router-group-score-topk ours would sum topk / topk_group
    for family, groups, topk in (("glm4_moe", (4, 2), 6), ("dots1", (2, 1), 4)):
        config = config_from_hf({**SIZES, **GLM, "model_type": family, "n_routed_experts": 16, "n_group": groups[0],
                                 "topk_group": groups[1], "num_experts_per_tok": topk}, family)
        assert (config.moe_router_num_groups, config.moe_router_group_topk) == groups
        assert config.moe_router_group_score_topk == 2
        assert get_family(family).to_hf_config(config)["n_group"] == groups[0]


def test_groups_that_keep_every_expert_are_no_group_limit() -> None:
    for groups in ((1, 1), (4, 4)):
        config = config_from_hf({**SIZES, **GLM, "n_group": groups[0], "topk_group": groups[1],
                                 "routed_scaling_factor": 1.0}, "glm4_moe")
        assert config.moe_router_num_groups is None and config.moe_router_topk_scaling_factor is None


def test_group_score_our_hf_config_cannot_express_is_refused() -> None:
    config = config_from_hf({**SIZES, **GLM, "n_routed_experts": 16, "n_group": 4, "topk_group": 2,
                             "num_experts_per_tok": 4}, "glm4_moe")
    config = dataclasses.replace(config, moe_router_group_score_topk=3)  # groups scored by their best 3
    with pytest.raises(RegistryError, match="glm4_moe scores a group by the sum of its best 2"):
        get_family("glm4_moe").to_hf_config(config)


def test_ernie_router_is_pre_softmax_with_bias_and_hy_v3_dense_prefix() -> None:
    ernie = config_from_hf({**SIZES, **ERNIE, "moe_layer_start_index": 2}, "ernie4_5_moe")
    assert (ernie.moe_router_pre_softmax, ernie.norm_topk_prob, ernie.moe_router_enable_expert_bias) == (True,) * 3
    assert ernie.first_k_dense_replace == 2 and ernie.moe_shared_expert_intermediate_size is None
    hy = config_from_hf({**SIZES, **HY, "mlp_layer_types": ["dense", "dense", "sparse"]}, "hy_v3")
    assert hy.first_k_dense_replace == 2 and hy.moe_router_topk_scaling_factor == 2.826  # HYV3Config default


def test_minimax_rotary_dim_is_partial_rope() -> None:
    config = config_from_hf({**SIZES, **MINIMAX, "rotary_dim": 8}, "minimax_m2")
    assert config.rotary_percent == 0.5 and config.qk_norm == "full_width" and config.moe_ffn_hidden_size == 128
