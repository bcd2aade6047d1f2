"""Parity cases of GPT-OSS (merged into ``test_zoo_parity.CASES``).

Four experts, top-2, expert FFN 32, window 4 on alternating layers, YaRN with its ramp bounds unrounded. The
clamp limit is small enough that the tiny model's gate and up values cross it (both clamps act).
``gpt_oss_no_attention_bias``: no q/k/v/o biases (experts and router keep theirs: --add-mlp-bias
--add-router-bias), any layer pattern, plain RoPE.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

GPT_OSS = dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16, sliding_window=4,
               swiglu_limit=0.3, rope_parameters={"rope_type": "yarn", "factor": 8.0, "beta_fast": 8.0,
                                                  "beta_slow": 1.0, "truncate": False, "rope_theta": 10000.0,
                                                  "original_max_position_embeddings": 32})

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", GPT_OSS, "gpt-oss"),
    "gpt_oss_no_attention_bias": ("GptOssConfig", "GptOssForCausalLM",
                                  dict(GPT_OSS, attention_bias=False, rope_parameters={"rope_type": "default",
                                                                                       "rope_theta": 500.0},
                                       layer_types=["full_attention", "sliding_attention", "sliding_attention"]),
                                  "gpt_oss"),
}
