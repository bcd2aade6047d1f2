"""Parity cases of DeepSeek-V4 (merged into ``test_zoo_parity.CASES``).

Three layers, one of each attention kind: CSA (entries of 2 overlapping tokens, an indexer of 2 heads of 16
keeping the top-2 of the 6 entries), HCA (entries of 4 tokens), sliding only; a window of 5 of the 12 tokens,
so every kind masks. Head dim 32 with its trailing quarter rotated (interleaved), 4 heads in 2 output groups of
rank 16, one shared KV head. Two hyper-connection streams with 5 Sinkhorn steps. Four experts, top-2, sqrtsoftplus
(``deepseek_v4``) or sigmoid (``deepseek_v4_sigmoid``) scores, the first layer hash-routed (``tid2eid`` drawn by
``test_zoo_parity.build_hf_model``), the experts' SwiGLU clamped at 0.5 so the clamp bites. The compressed layers'
RoPE is YaRN on its own base; the sliding layer's is plain.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

_V4 = dict(num_key_value_heads=1, head_dim=32, q_lora_rank=24, moe_intermediate_size=32, n_routed_experts=4,
           num_experts_per_tok=2, n_shared_experts=1, sliding_window=5, o_groups=2, o_lora_rank=16, index_n_heads=2,
           index_head_dim=16, index_topk=2, swiglu_limit=0.5,
           layer_types=["compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"],
           compress_rates={"compressed_sparse_attention": 2, "heavily_compressed_attention": 4},
           mlp_layer_types=["hash_moe", "moe", "moe"], partial_rotary_factor=0.25, hc_mult=2, hc_sinkhorn_iters=5,
           rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
           compress_rope_theta=5000.0)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "deepseek_v4": ("DeepseekV4Config", "DeepseekV4ForCausalLM", _V4, "deepseek4"),
    "deepseek_v4_sigmoid": ("DeepseekV4Config", "DeepseekV4ForCausalLM",
                            dict(_V4, scoring_func="sigmoid", routed_scaling_factor=1.0, rope_parameters=None,
                                 layer_types=["sliding_attention", "compressed_sparse_attention",
                                              "compressed_sparse_attention"], mlp_layer_types=None,
                                 num_hash_layers=0, hc_mult=3, index_topk=8), "deepseek_v4"),
}
