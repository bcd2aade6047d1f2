"""Parity cases of the Mamba2 hybrids whose HF layer is a mixer and an MLP (merged into
``test_zoo_parity.CASES``).

Bamba with Mamba2 (2 groups over 8 heads, a chunk of 5 over 12 tokens, dt clamped to [0.01, 5]) in layers 0 and 2
and attention with half-rotated heads and biases in layer 1, SwiGLU MLPs with biases: our pattern ``M-*-M-``.
Granite-4 with every multiplier, RoPE, attention between two Mamba2 layers, and MoE (4 experts, top 2) plus the
shared expert in every layer: ``ME*EME``; a second Granite-4 without experts (the shared expert is each layer's
dense MLP: ``*-M-M-``), without positions, tied, with one Mamba group (replicated at TP 2). Jamba with Mamba1
(weighted dt/B/C norms, dt rank 6), attention without positions in HF layer 1 (every 3rd from 1) and MoE (4
experts, the top 2 of the softmax, not renormalised) in layers 1 and 3 (every 2nd from 1): ``M-*EM-ME``. ``initializer_range`` 0.2 makes B and C large enough that dt visibly
moves the loss (transformers initialises dt_bias to 1 and A to -1..-heads whatever the config says), so the
training test sees every gradient.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

MAMBA2 = dict(mamba_n_heads=8, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=5,
              mamba_d_conv=4, initializer_range=0.2)
# Falcon-H1's Mamba width comes from mamba_d_ssm (not expand x hidden): 4 heads of 12 over a hidden of 64
FALCON_H1 = dict(mamba_d_ssm=48, mamba_n_heads=4, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=5,
                 mamba_d_conv=4, initializer_range=0.2)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "bamba": ("BambaConfig", "BambaForCausalLM",
              dict(MAMBA2, attn_layer_indices=[1], attention_bias=True, mlp_bias=True, time_step_limit=(0.01, 5.0)),
              "bamba"),
    "granitemoehybrid": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                         dict(MAMBA2, layer_types=["linear_attention", "full_attention", "linear_attention"],
                              position_embedding_type="rope", num_local_experts=4, num_experts_per_tok=2,
                              intermediate_size=32, shared_intermediate_size=48, embedding_multiplier=3.0,
                              residual_multiplier=0.4, attention_multiplier=0.3, logits_scaling=6.0),
                         "granitemoehybrid"),
    "granitemoehybrid_dense_nope_tied": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                                         dict(MAMBA2, layer_types=["full_attention", "linear_attention",
                                                                   "linear_attention"],
                                              num_local_experts=0, shared_intermediate_size=48, mamba_n_groups=1,
                                              tie_word_embeddings=True, residual_multiplier=0.5, vocab_size=101),
                                         "granitemoehybrid"),
    "falcon_h1": ("FalconH1Config", "FalconH1ForCausalLM",
                  dict(FALCON_H1, mamba_rms_norm=True, mamba_norm_before_gate=True, mamba_n_groups=1, time_step_limit=(0.01, 5.0),
                       embedding_multiplier=2.0, lm_head_multiplier=0.7, key_multiplier=0.5,
                       attention_in_multiplier=0.8, attention_out_multiplier=1.3, ssm_in_multiplier=1.2,
                       ssm_out_multiplier=0.6, ssm_multipliers=[0.5, 1.5, 0.8, 1.25, 0.9],
                       mlp_multipliers=[0.75, 1.4]), "falcon_h1"),
    "falcon_h1_plain": ("FalconH1Config", "FalconH1ForCausalLM",
                        dict(FALCON_H1, mamba_rms_norm=False, mamba_n_groups=1, tie_word_embeddings=True,
                             num_key_value_heads=1, vocab_size=101), "falcon_h1"),
    "falcon_h1_gate_then_norm": ("FalconH1Config", "FalconH1ForCausalLM",
                                 dict(FALCON_H1, mamba_rms_norm=True, mamba_norm_before_gate=False,
                                      ssm_multipliers=[1.1, 0.9, 1.0, 1.0, 0.7]), "falcon_h1"),
    "jamba": ("JambaConfig", "JambaForCausalLM",
              dict(num_hidden_layers=4, attn_layer_period=3, attn_layer_offset=1, expert_layer_period=2,
                   expert_layer_offset=1, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_dt_rank=6,
                   mamba_expand=2, initializer_range=0.2), "jamba"),
}
