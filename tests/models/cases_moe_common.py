"""Parity cases of the mixture-of-experts families (merged into ``test_zoo_parity.CASES``).

Four experts, top-2 (so the tiny training test's tokens reach every expert), expert FFN 32.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16), "mixtral"),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16,
                       norm_topk_prob=True), "qwen3-moe"),
    "qwen3_moe_dense_first": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                              dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16,
                                   mlp_only_layers=[0], norm_topk_prob=False), "qwen3_moe"),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
                       norm_topk_prob=False), "qwen2-moe"),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM",
              dict(num_experts=4, num_experts_per_tok=2, intermediate_size=32, clip_qkv=4.0), "olmoe"),
}
