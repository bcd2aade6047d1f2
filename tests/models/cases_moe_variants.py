"""Parity cases of the MoE variants of covered decoders (merged into ``test_zoo_parity.CASES``).

``exaone_moe``: 8 experts in 4 groups (the best 2 groups, top-4), a routed scaling factor, two shared experts,
one leading dense layer, a sliding window with the full layer NoPE, a small RoPE base (so RoPE matters);
``exaone_moe_full_first``: the first layer full (NoPE), a window of 3, no dense layer, top-k not renormalised
(transformers' ExaoneMoeConfig requires an integer ``sliding_window``).
``cohere2_moe``: LayerNorm, softmax over the top-k logits, a shared expert added ("sum"), a dense first layer
of its own FFN size that attends fully with RoPE (``prefix_dense_sliding_window_pattern`` 1), then a sliding
layer and a NoPE full layer; ``head_dim`` other than hidden / heads, attention biases, a logit scale;
``cohere2_moe_sigmoid``: RMSNorm, renormalised sigmoid routing, a shared expert averaged with the routed ones
(transformers' default "average": both halves times 0.5), untied, two dense layers whose full one is NoPE (prefix
pattern 2).
``minicpm5_moe``: the gated attention with biases, 8 experts in 4 groups, two shared experts, a dense first
layer, a small RoPE base; ``minicpm5_moe_mqa``: one KV head, every layer MoE, top-k not renormalised.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

MOE = dict(num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16)
SMALL_ROPE = dict(rope_parameters={"rope_type": "default", "rope_theta": 100.0})

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "exaone_moe": ("ExaoneMoeConfig", "ExaoneMoeForCausalLM",
                   dict(MOE, **SMALL_ROPE, num_experts=8, num_experts_per_tok=4, n_group=4, topk_group=2,
                        num_shared_experts=2, first_k_dense_replace=1, routed_scaling_factor=2.5, sliding_window=4,
                        layer_types=["sliding_attention", "full_attention", "sliding_attention"]), "exaone_moe"),
    "exaone_moe_full_first": ("ExaoneMoeConfig", "ExaoneMoeForCausalLM",
                              dict(MOE, **SMALL_ROPE, num_experts=4, num_shared_experts=1, first_k_dense_replace=0,
                                   norm_topk_prob=False, routed_scaling_factor=1.5, sliding_window=3,
                                   layer_types=["full_attention", "sliding_attention", "sliding_attention"]),
                              "exaone_moe"),
    "cohere2_moe": ("Cohere2MoeConfig", "Cohere2MoeForCausalLM",
                    dict(**SMALL_ROPE, num_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=24,
                         num_shared_experts=1, shared_expert_combination_strategy="sum", first_k_dense_replace=1,
                         prefix_dense_intermediate_size=96, sliding_window=4, sliding_window_pattern=2,
                         attention_bias=True, logit_scale=0.25, pad_token_id=0, bos_token_id=1, eos_token_id=2),
                    "cohere2_moe"),
    "cohere2_moe_sigmoid": ("Cohere2MoeConfig", "Cohere2MoeForCausalLM",
                            dict(**SMALL_ROPE, num_experts=4, num_experts_per_tok=2, intermediate_size=32,
                                 head_dim=16, expert_selection_fn="sigmoid", norm_topk_prob=True, rms_norm_eps=1e-6,
                                 num_shared_experts=1, shared_expert_combination_strategy="average",
                                 first_k_dense_replace=2, prefix_dense_sliding_window_pattern=2,
                                 prefix_dense_intermediate_size=48, sliding_window=4, tie_word_embeddings=False,
                                 pad_token_id=0, bos_token_id=1, eos_token_id=2), "cohere2_moe"),
    "minicpm5_moe": ("MiniCPM5MoeConfig", "MiniCPM5MoeForCausalLM",
                     dict(MOE, **SMALL_ROPE, n_routed_experts=8, num_experts_per_tok=4, n_group=4, topk_group=2,
                          n_shared_experts=2, first_k_dense_replace=1, attention_bias=True,
                          routed_scaling_factor=3.66), "minicpm5_moe"),
    "minicpm5_moe_mqa": ("MiniCPM5MoeConfig", "MiniCPM5MoeForCausalLM",
                         dict(MOE, **SMALL_ROPE, n_routed_experts=4, n_shared_experts=1, first_k_dense_replace=0,
                              num_key_value_heads=1, norm_topk_prob=False, routed_scaling_factor=1.5),
                         "minicpm5_moe"),
}
