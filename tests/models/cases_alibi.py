"""Parity cases of the ALiBi group (mindspeed_llm/models/zoo_alibi.py): Bloom, MPT, Jais2, Starcoder2, Nemotron.

Merged into ``tests/models/test_zoo_parity.py``'s CASES (BASE: hidden 64, 4 heads, 3 layers). Variants: Bloom
with 6 heads (not a power of 2: Bloom's interleaved slopes, 3 per TP rank), MPT with q/k/v clipping and a
softmax scale, Starcoder2 with a sliding window and without biases, Nemotron with q/k/v/o biases only,
grouped KV heads and a rotated share of 0.25, Jais2 with ReLU and MLP biases only.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "bloom": ("BloomConfig", "BloomForCausalLM", dict(n_head=4), "bloom"),
    "bloom_6heads": ("BloomConfig", "BloomForCausalLM", dict(hidden_size=48, n_head=6, vocab_size=100), "bloom"),
    "mpt": ("MptConfig", "MptForCausalLM", dict(n_heads=4, max_seq_len=64), "mpt"),
    "mpt_clip_scale_6heads": ("MptConfig", "MptForCausalLM",
                              dict(d_model=48, n_heads=6, max_seq_len=32, tie_word_embeddings=False,
                                   attn_config=dict(clip_qkv=0.4, softmax_scale=0.3)), "mpt"),
    "jais2": ("Jais2Config", "Jais2ForCausalLM", dict(), "jais2"),
    "jais2_relu_mlp_bias": ("Jais2Config", "Jais2ForCausalLM",
                            dict(hidden_act="relu", attention_bias=False, mlp_bias=True, tie_word_embeddings=True),
                            "jais2"),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", dict(), "starcoder2"),
    "starcoder2_window_nobias": ("Starcoder2Config", "Starcoder2ForCausalLM",
                                 dict(sliding_window=4, use_bias=False, tie_word_embeddings=False), "starcoder2"),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", dict(), "nemotron"),
    "nemotron_attention_bias": ("NemotronConfig", "NemotronForCausalLM",
                                dict(head_dim=32, attention_bias=True, partial_rotary_factor=0.25,
                                     num_key_value_heads=1), "nemotron"),
}
