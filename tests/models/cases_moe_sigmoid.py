"""Parity cases of the sigmoid / expert-bias MoE families (merged into ``test_zoo_parity.CASES``).

Four experts, top-2 (so the tiny training test's tokens reach every expert), expert FFN 32; the routers'
``e_score_correction_bias`` is perturbed like every weight (``test_zoo_parity.build_hf_model``), so the
bias changes which experts are chosen. Variants: group-limited routing (``glm4_moe``: 8 experts in 4 groups,
the best 2 groups, top-4; ``solar_open``: 2 groups of 2, the best group), routed scaling factors, shared
experts, leading dense layers, sliding-window layers (``dots1``), partial RoPE (``glm4_moe``, ``minimax_m2``).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

MOE = dict(num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "glm4_moe": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                 dict(MOE, n_routed_experts=8, num_experts_per_tok=4, n_group=4, topk_group=2, n_shared_experts=1,
                      first_k_dense_replace=1, routed_scaling_factor=2.5, use_qk_norm=True, attention_bias=True),
                 "glm45"),
    "glm4_moe_ungrouped": ("Glm4MoeConfig", "Glm4MoeForCausalLM",
                           dict(MOE, n_routed_experts=4, n_shared_experts=2, first_k_dense_replace=0,
                                norm_topk_prob=False), "glm4_moe"),
    "dots1": ("Dots1Config", "Dots1ForCausalLM",
              dict(MOE, n_routed_experts=4, n_shared_experts=2, first_k_dense_replace=1, attention_bias=True,
                   sliding_window=4, max_window_layers=2), "dots1"),
    "solar_open": ("SolarOpenConfig", "SolarOpenForCausalLM",
                   dict(MOE, n_routed_experts=4, n_group=2, topk_group=1, n_shared_experts=1, attention_bias=True,
                        routed_scaling_factor=1.5), "solar_open"),
    "ernie4_5_moe": ("Ernie4_5_MoeConfig", "Ernie4_5_MoeForCausalLM",
                     dict(moe_num_experts=4, moe_k=2, moe_intermediate_size=32, moe_num_shared_experts=1,
                          moe_layer_start_index=1, pad_token_id=0), "ernie4_5_moe"),
    "minimax_m2": ("MiniMaxM2Config", "MiniMaxM2ForCausalLM",
                   dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16, rotary_dim=8,
                        bos_token_id=1, eos_token_id=2), "minimax_m2"),
    "hy_v3": ("HYV3Config", "HYV3ForCausalLM",
              dict(MOE, num_experts=4, num_shared_experts=1, attention_bias=True, router_scaling_factor=2.826),
              "hy_v3"),
}
