"""Parity cases of the linear-attention hybrid families (merged into ``test_zoo_parity.CASES``).

Qwen3-Next with DeltaNet, attention and DeltaNet layers: 2 key heads and 4 value heads (the grouped value
heads of the real model), gated attention with zero-centred per-head q/k norms and a quarter of each head
rotated, a leading dense layer then MoE layers of 4 experts (top 2, renormalised) with a gated shared expert.
``initializer_range`` 0.2 lets every layer's dt visibly move the training test's loss (at 0.02 the last
DeltaNet's dt_bias gradient is ~1e-6). A second case is dense (``num_experts`` 0) with as many value heads as key heads and tied embeddings.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

DELTANET = dict(linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                linear_num_value_heads=4, head_dim=16, initializer_range=0.2)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                   dict(DELTANET, layer_types=["linear_attention", "full_attention", "linear_attention"],
                        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        shared_expert_intermediate_size=48, norm_topk_prob=True, mlp_only_layers=[0]),
                   "qwen3_next"),
    "qwen3_next_dense_tied": ("Qwen3NextConfig", "Qwen3NextForCausalLM",
                              dict(DELTANET, linear_num_value_heads=2, num_experts=0, tie_word_embeddings=True,
                                   layer_types=["full_attention", "linear_attention", "linear_attention"]),
                              "qwen3_next"),
}

# Qwen3.5's text model: the same layers with separate q/k/v, z, b and a projections and interleaved
# multimodal RoPE (two of the two rotated frequencies in the first two sections; text positions make the
# split irrelevant); Qwen3.5-MoE: every layer MoE, always renormalised. Their DeltaNet layers come first and
# the init is 0.1: at 0.2 the TP 2 step drifts from TP 1 by ~1e-5 in fp32 (a high-gain random model), and a
# last-layer DeltaNet's dt gradient at 0.1 is ~1e-6
MROPE = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "mrope_section": [1, 1, 0],
         "mrope_interleaved": True}
CASES.update({
    "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM",
                     dict(DELTANET, rope_parameters=MROPE, initializer_range=0.1,
                          layer_types=["linear_attention", "linear_attention", "full_attention"]), "qwen3_5_text"),
    "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM",
                         dict(DELTANET, rope_parameters=MROPE, num_experts=4, num_experts_per_tok=2,
                              moe_intermediate_size=32, shared_expert_intermediate_size=48, initializer_range=0.1,
                              layer_types=["linear_attention", "linear_attention", "full_attention"]),
                         "qwen3_5_moe_text"),
})

# Kimi Linear: KDA, MLA without positions and KDA layers (4 heads of 16, a kernel-4 conv), the first layer dense
# and then MoE layers of 4 experts (top 2 of the sigmoid scores with the selection bias, in 2 groups of which
# the best one is kept, renormalised, times 2.5) with one shared expert; q from one projection. A second case
# has a q low-rank projection, MLA first, no group limit and no dense layer.
KDA = dict(linear_attn_config={"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4}, kv_lora_rank=32,
           qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, num_key_value_heads=4, moe_intermediate_size=32,
           num_experts=4, num_experts_per_token=2, routed_scaling_factor=2.5, initializer_range=0.1,
           pad_token_id=0, bos_token_id=1, eos_token_id=2)
CASES.update({
    "kimi_linear": ("KimiLinearConfig", "KimiLinearForCausalLM",
                    dict(KDA, layer_types=["linear_attention", "full_attention", "linear_attention"],
                         num_expert_group=2, topk_group=1, first_k_dense_replace=1), "kimi_linear"),
    "kimi_linear_q_lora": ("KimiLinearConfig", "KimiLinearForCausalLM",
                           dict(KDA, q_lora_rank=24, moe_renormalize=False, first_k_dense_replace=0,
                                layer_types=["full_attention", "linear_attention", "linear_attention"]),
                           "kimi_linear"),
})

# MiniMax-Text-01: lightning, attention and lightning layers (4 heads of 16, transformers' blocks of 4 tokens so
# the test's sequence spans several and a partial one), each with 4 experts (top 2 of a softmax, renormalised),
# residual adds of 1.7 x the normed input and 0.8 x the branch. A second case is attention first, with tied
# embeddings and transformers' default factors (1 and 1: still post-norm residuals).
MINIMAX = dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, block_size=4)
MINIMAX_FACTORS = {f"{kind}_{which}_factor": value for kind in ("full_attn", "linear_attn", "mlp")
                   for which, value in (("alpha", 1.7), ("beta", 0.8))}
CASES.update({
    "minimax": ("MiniMaxConfig", "MiniMaxForCausalLM",
                dict(MINIMAX, **MINIMAX_FACTORS,
                     layer_types=["linear_attention", "full_attention", "linear_attention"]), "minimax"),
    "minimax_default_factors_tied": ("MiniMaxConfig", "MiniMaxForCausalLM",
                                     dict(MINIMAX, tie_word_embeddings=True,
                                          layer_types=["full_attention", "linear_attention", "linear_attention"]),
                                     "minimax"),
})

# OLMo-Hybrid: DeltaNet, attention, DeltaNet (2 key / 4 value heads of 16, beta doubled) with Llama's pre-norms in
# the DeltaNet layers and Olmo3's output norms and full-width q/k norms in the attention layer, RoPE there; a
# second case without positions (rope_theta null, as the released checkpoints), beta in (0, 1), transformers'
# default DeltaNet sizes (4 heads, key dim 12, value dim 24), one KV head and tied embeddings
OLMO_HYBRID_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
CASES.update({
    "olmo_hybrid": ("OlmoHybridConfig", "OlmoHybridForCausalLM",
                    dict(OLMO_HYBRID_IDS, linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                         linear_num_value_heads=4, initializer_range=0.2,
                         layer_types=["linear_attention", "full_attention", "linear_attention"]), "olmo_hybrid"),
    "olmo_hybrid_nope_tied": ("OlmoHybridConfig", "OlmoHybridForCausalLM",
                              dict(OLMO_HYBRID_IDS, rope_parameters={"rope_type": "default", "rope_theta": None},
                                   linear_allow_neg_eigval=False, num_key_value_heads=1, tie_word_embeddings=True,
                                   initializer_range=0.1,
                                   layer_types=["full_attention", "linear_attention", "linear_attention"]),
                              "olmo_hybrid"),
})

# Bailing's hybrids (Ling): KDA, MLA (its gate per head, interleaved RoPE), KDA, MLA, and KDA's full-rank gates.
# ``bailing_hybrid``: the unbounded (softplus) forget gate, q_lora_rank, every layer dense but the last, a conv of 3
# (the family's training-step case: the bounded gate's sigmoid saturates at transformers' A_log / dt_bias init, so
# its dt_bias gradient is ~0 there); ``bailing_hybrid_bounded``: the bounded forget gate, layer 0 dense and the rest
# MoE of 4 experts in 2 groups (top-2 from the best group, sigmoid with the correction bias, renormalised, scaled)
# with a shared expert
BAILING = dict(num_hidden_layers=4, head_dim=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
               v_head_dim=16, num_local_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, n_group=2,
               topk_group=1, routed_scaling_factor=1.5, num_key_value_heads=4, pad_token_id=0, eos_token_id=1,
               initializer_range=0.1,
               layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"])
CASES.update({
    "bailing_hybrid": ("BailingHybridConfig", "BailingHybridForCausalLM",
                       dict(BAILING, first_k_dense_replace=3, kda_safe_gate=False, q_lora_rank=24,
                            short_conv_kernel_size=3, rope_theta=5000.0), "bailing_hybrid"),
    "bailing_hybrid_bounded": ("BailingHybridConfig", "BailingHybridForCausalLM",
                               dict(BAILING, first_k_dense_replace=1, kda_lower_bound=-3.0, rope_theta=10000.0),
                               "bailing_hybrid"),
})
