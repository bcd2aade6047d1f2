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
    "jamba": ("JambaConfig", "JambaForCausalLM",
              dict(num_hidden_layers=4, attn_layer_period=3, attn_layer_offset=1, expert_layer_period=2,
                   expert_layer_offset=1, num_experts=4, num_experts_per_tok=2, mamba_d_state=8, mamba_dt_rank=6,
                   mamba_expand=2, initializer_range=0.2), "jamba"),
}
