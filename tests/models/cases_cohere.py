"""Parity cases of Cohere's families (mindspeed_llm/models/families/cohere.py), merged into
``tests/models/test_zoo_parity.py``'s CASES.

Cohere with per-head q/k LayerNorms and q/k/v/o biases (``cohere``), and with one
KV head so that TP=2 replicates the K norm's weights (``cohere_qk_norm_mqa``);
Cohere2 with a window of 4 and an irregular layer pattern (full layers without
RoPE); CohereCompass text with a NoPE full layer between sliding layers of their
own RoPE base (``cohere_compass``) and with RoPE on both kinds at two bases
(``cohere_compass_two_bases``).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

_COMPASS_TYPES = ["sliding_attention", "full_attention", "sliding_attention"]

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "cohere": ("CohereConfig", "CohereForCausalLM",
               dict(use_qk_norm=True, attention_bias=True, logit_scale=0.25, layer_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000.0}), "cohere"),
    "cohere_qk_norm_mqa": ("CohereConfig", "CohereForCausalLM",
                           dict(use_qk_norm=True, num_key_value_heads=1, tie_word_embeddings=False, vocab_size=101),
                           "cohere"),
    "cohere2": ("Cohere2Config", "Cohere2ForCausalLM",
                dict(sliding_window=4, logit_scale=0.5, layer_types=["full_attention", "sliding_attention",
                                                                     "sliding_attention"]), "cohere2"),
    "cohere_compass": ("CohereCompassTextConfig", "CohereCompassForCausalLM",
                       dict(sliding_window=4, logit_scale=0.3, layer_types=_COMPASS_TYPES,
                            rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                             "full_attention": None}), "cohere_compass"),
    "cohere_compass_two_bases": ("CohereCompassTextConfig", "CohereCompassForCausalLM",
                                 dict(sliding_window=4, attention_bias=True, layer_types=_COMPASS_TYPES,
                                      rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 100.0},
                                                       "full_attention": {"rope_type": "default",
                                                                          "rope_theta": 5000.0}}), "cohere_compass"),
}
