"""Parity cases of LFM2 and LFM2-MoE (merged into ``test_zoo_parity.CASES``): short-conv and attention layers mixed.

``lfm2``: conv, attention, conv layers (``layer_types``), conv biases, tied embeddings, and the MLP width
adjusted as Lfm2MLP does (2/3 of 128 rounded up to a multiple of 16: 96). ``lfm2_untied_width4``: the
attention layers given by ``full_attn_idxs`` (attention, conv, attention), a conv of width 4 without
biases, untied, the MLP width as given, one KV head (replicated at TP 2).
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
