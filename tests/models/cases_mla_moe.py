"""Parity cases of the multi-latent-attention MoE families (merged into ``test_zoo_parity.CASES``).

Four experts, top-2, expert FFN 32, one KV head per query head (MLA). The sigmoid-routed families' router
bias ``e_score_correction_bias`` is a buffer: ``test_zoo_parity.build_hf_model`` perturbs it like the
weights, so the biased selection differs from the unbiased one.

* ``deepseek_v2``: a dense first layer, two shared experts, YaRN, greedy pre-softmax top-2 times 1.5;
  ``deepseek_v2_group_limited``: group_limited_greedy (a group scored by its best expert) over 4 groups
  of 2 with top-3 over the best 3 groups (topk not a multiple of topk_group), plain q projection.
* ``deepseek_v3``: sigmoid with the bias, top-2 within the best 2 of 4 groups of 2 (a group scored by its
  best two, not Megatron's topk / group_topk = 1), renormalised,
  scaled by 2.5, interleaved RoPE; ``deepseek_v3_half_rotation``: rope_interleave false, one group,
  no renormalisation, no q latent, attention biases.
* ``glm4_moe_lite``: mlp_layer_types with two leading dense layers, sigmoid with the bias.
* ``deepseek_v32``: DeepSeek-V3 with DSA: an indexer of 4 heads of 16 keeping the top-5 of the 12 tokens
  (half-split indexer RoPE), YaRN, a dense first layer; ``glm_moe_dsa``: GLM-5's interleaved indexer RoPE and
  cross-layer sharing (layer 1 reuses layer 0's top-k: indexer_types full, shared, full).
* ``mistral4``: softmax top-2 within 2 groups of 2 (top-2 sum), YaRN over partial_rotary_factor of the
  q/k head and the Llama-4 query temperature over 4 positions, fused 3-D experts.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

_MLA = dict(num_key_value_heads=4, kv_lora_rank=24, q_lora_rank=20, qk_nope_head_dim=12, qk_rope_head_dim=8,
            v_head_dim=10)
_MOE = dict(_MLA, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1)
_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
         "mscale": 0.8, "mscale_all_dim": 0.9}

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "deepseek_v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                    dict(_MOE, n_shared_experts=2, first_k_dense_replace=1, routed_scaling_factor=1.5,
                         topk_method="greedy", rope_parameters=_YARN), "deepseek2-lite"),
    "deepseek_v2_group_limited": ("DeepseekV2Config", "DeepseekV2ForCausalLM",
                                  dict(_MOE, n_routed_experts=12, num_experts_per_tok=3, q_lora_rank=None,
                                       topk_method="group_limited_greedy", n_group=4, topk_group=2),
                                  "deepseek_v2"),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    dict(_MOE, n_routed_experts=8, n_group=4, topk_group=2, first_k_dense_replace=1,
                         routed_scaling_factor=2.5,
                         norm_topk_prob=True, rope_parameters=_YARN), "deepseek3"),
    "deepseek_v3_half_rotation": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                                  dict(_MOE, n_group=1, topk_group=1, first_k_dense_replace=0, q_lora_rank=None,
                                       norm_topk_prob=False, rope_interleave=False, attention_bias=True,
                                       routed_scaling_factor=1.0), "deepseek_v3"),
    "glm4_moe_lite": ("Glm4MoeLiteConfig", "Glm4MoeLiteForCausalLM",
                      dict(_MOE, mlp_layer_types=["dense", "dense", "sparse"], routed_scaling_factor=1.8),
                      "glm4_moe_lite"),
    "deepseek_v32": ("DeepseekV32Config", "DeepseekV32ForCausalLM",
                     dict(_MOE, n_routed_experts=8, n_group=4, topk_group=2, first_k_dense_replace=1,
                          routed_scaling_factor=2.5, rope_parameters=_YARN, index_topk=5, index_head_dim=16,
                          index_n_heads=4), "deepseek32"),
    "glm_moe_dsa": ("GlmMoeDsaConfig", "GlmMoeDsaForCausalLM",
                    dict(_MOE, first_k_dense_replace=1, routed_scaling_factor=1.8, index_topk=4, index_head_dim=12,
                         index_n_heads=2, indexer_types=["full", "shared", "full"]), "glm_moe_dsa"),
    "mistral4": ("Mistral4Config", "Mistral4ForCausalLM",
                 dict(_MOE, n_group=2, topk_group=1, first_k_dense_replace=1,
                      rope_parameters={**_YARN, "original_max_position_embeddings": 4,
                                       "llama_4_scaling_beta": 0.3, "partial_rotary_factor": 0.4}), "mistral4"),
}
