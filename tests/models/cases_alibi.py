"""Parity cases of the ALiBi families (mindspeed_llm/models/families/alibi.py): Bloom and MPT.

Merged into ``tests/models/test_zoo_parity.py``'s CASES (BASE: hidden 64, 4 heads, 3 layers). Variants: Bloom
with 6 heads (not a power of 2: Bloom's interleaved slopes, 3 per TP rank), MPT with q/k/v clipping and a
softmax scale.
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
}
