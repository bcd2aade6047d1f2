"""Parity cases of LFM2, LFM2-MoE and LFM3 (merged into ``test_zoo_parity.CASES``): short-conv and attention layers mixed.

``lfm2``: conv, attention, conv layers (``layer_types``), conv biases, tied embeddings, and the MLP width
adjusted as Lfm2MLP does (2/3 of 128 rounded up to a multiple of 16: 96). ``lfm2_untied_width4``: the
attention layers given by ``full_attn_idxs`` (attention, conv, attention), a conv of width 4 without
biases, untied, the MLP width as given, one KV head (replicated at TP 2).

``lfm3``: conv, sliding, full and conv layers; each kind of attention with its RoPE (default of base 100 on
the sliding layer, proportional over half the head on the full one), the per-head output gate (g_proj) and the
sandwich norms on. ``lfm3_plain``: no gate, no sandwich
norms, conv biases, untied, every attention layer full with default RoPE.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "lfm2": ("Lfm2Config", "Lfm2ForCausalLM",
             dict(layer_types=["conv", "full_attention", "conv"], conv_L_cache=3, conv_bias=True,
                  block_multiple_of=16, norm_eps=1e-5, pad_token_id=0), "lfm2"),
    "lfm2_untied_width4": ("Lfm2Config", "Lfm2ForCausalLM",
                           dict(full_attn_idxs=[0, 2], conv_L_cache=4, conv_bias=False, tie_word_embeddings=False,
                                block_auto_adjust_ff_dim=False, num_key_value_heads=1, vocab_size=101), "lfm2"),
}
CASES.update({
    # LFM2-MoE: layer 0 dense (num_dense_layers 1), layers 1-2 MoE of 4 experts (top 2, sigmoid, expert bias,
    # renormalised, scaled); conv, attention, conv
    "lfm2_moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM",
                 dict(layer_types=["conv", "full_attention", "conv"], conv_L_cache=3, conv_bias=True, num_experts=4,
                      num_experts_per_tok=2, moe_intermediate_size=32, num_dense_layers=1, routed_scaling_factor=1.5,
                      norm_eps=1e-5, pad_token_id=0), "lfm2_moe"),
})
CASES.update({
    "lfm3": ("Lfm3Config", "Lfm3ForCausalLM",
             dict(num_hidden_layers=4, layer_types=["conv", "sliding_attention", "full_attention", "conv"],
                  head_dim=16, sliding_window=4, conv_L_cache=3, norm_eps=1e-5, pad_token_id=0,
                  rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                   "full_attention": {"rope_type": "proportional", "rope_theta": 5000.0,
                                                      "partial_rotary_factor": 0.5}}), "lfm3"),
    "lfm3_plain": ("Lfm3Config", "Lfm3ForCausalLM",
                   dict(layer_types=["full_attention", "conv", "full_attention"], head_dim=24, conv_L_cache=4,
                        conv_bias=True, use_attention_gate=False, use_sandwich_norm=False, tie_word_embeddings=False,
                        norm_eps=1e-5, pad_token_id=0, vocab_size=101,
                        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000.0}}), "lfm3"),
})

# RecurrentGemma (Griffin): recurrent, recurrent, attention (MQA, half-rotated, a window of 5 over 12 tokens),
# a recurrence width of 96 (not the hidden 64) in 4 gate blocks, a conv of 4, the logits capped, tied; a second case
# with its attention first, two KV heads, q/k/v biases, the default width and untied embeddings
GRIFFIN = dict(num_attention_heads=4, intermediate_size=192, attention_window_size=5, logits_soft_cap=5.0,
               pad_token_id=0, bos_token_id=2, eos_token_id=1, initializer_range=0.2)
CASES.update({
    "recurrent_gemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM",
                        dict(GRIFFIN, num_key_value_heads=1, lru_width=96), "recurrent_gemma"),
    "recurrent_gemma_attention_first": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM",
                                        dict(GRIFFIN, num_key_value_heads=2, attention_bias=True,
                                             tie_word_embeddings=False,
                                             block_types=["attention", "recurrent", "recurrent"]),
                                        "recurrent_gemma"),
})

# RWKV-4: 3 blocks (our WCWCWC), time mixing 48 wide (not the hidden 64), channel mixing 96; a second case with the
# defaults (both widths from the hidden size)
CASES.update({
    "rwkv": ("RwkvConfig", "RwkvForCausalLM", dict(attention_hidden_size=48, intermediate_size=96, context_length=64,
                                                  initializer_range=0.2), "rwkv"),
    "rwkv_default_widths": ("RwkvConfig", "RwkvForCausalLM", dict(intermediate_size=None, context_length=64), "rwkv"),
})
