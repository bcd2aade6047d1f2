"""Parity cases of the dense multi-latent-attention group (merged into ``tests/models/test_zoo_parity.py``'s
CASES).

MiniCPM3 with a q latent, MiniCPM's embedding/residual/logit scales and YaRN with both mscales (the softmax
scale takes mscale_all_dim squared) (``minicpm3``), and with a plain q projection, q/kv-down and o biases and
an untied output layer (``minicpm3_plain_q_bias``); Youtu with interleaved RoPE (``youtu``) and with
half-rotation RoPE and no q latent (``youtu_plain_q``). MLA has one KV head per query head.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

_MLA = dict(num_key_value_heads=4, kv_lora_rank=24, q_lora_rank=20, qk_nope_head_dim=12, qk_rope_head_dim=8,
            v_head_dim=10)
_YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64,
         "mscale": 0.8, "mscale_all_dim": 0.9}

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "minicpm3": ("MiniCPM3Config", "MiniCPM3ForCausalLM",
                 dict(_MLA, scale_emb=3, scale_depth=1.2, dim_model_base=32, rope_parameters=_YARN), "minicpm3"),
    "minicpm3_plain_q_bias": ("MiniCPM3Config", "MiniCPM3ForCausalLM",
                              dict(_MLA, q_lora_rank=None, attention_bias=True, tie_word_embeddings=False,
                                   scale_emb=2, scale_depth=None, dim_model_base=None), "minicpm3"),
    "youtu": ("YoutuConfig", "YoutuForCausalLM", dict(_MLA), "youtu"),
    "youtu_plain_q": ("YoutuConfig", "YoutuForCausalLM", dict(_MLA, q_lora_rank=None, rope_interleave=False),
                      "youtu"),
}
