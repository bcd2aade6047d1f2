"""Parity cases of Llama 4 text, Aria text and GPT-OSS (``mindspeed_llm/models/families/moe_fused_experts.py``,
merged into ``test_zoo_parity.CASES``).

Llama 4: four layers (the default ``no_rope_layer_interval`` 4 makes layer 3 a NoPE layer), chunks of 4
tokens on the RoPE layers, an attention temperature that grows every 4 positions on the NoPE layer (so the
12-token inputs exercise the chunks and the temperature), llama3 RoPE scaling with a short original context
(so the scaling changes some frequencies), four experts with top-1 sigmoid routing on the expert input and a
shared expert. ``llama4_dense_layers``: MoE on layers 0 and 2 only (``moe_layers``), the dense layers of FFN
``intermediate_size_mlp``, no q/k norm. Aria: four experts, top-2 softmax, two shared experts.

GPT-OSS: four experts, top-2, expert FFN 32, window 4 on alternating layers, YaRN with its ramp bounds
unrounded. The clamp limit is small enough that the tiny model's gate and up values cross it (both clamps act).
``gpt_oss_no_attention_bias``: no q/k/v/o biases (experts and router keep theirs: --add-mlp-bias
--add-router-bias), any layer pattern, plain RoPE.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

LLAMA4 = dict(num_hidden_layers=4, head_dim=16, num_local_experts=4, num_experts_per_tok=1, intermediate_size=32,
              intermediate_size_mlp=64, attention_chunk_size=4, floor_scale=4, attn_scale=0.5, pad_token_id=0,
              rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
GPT_OSS = dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16, sliding_window=4,
               swiglu_limit=0.3, rope_parameters={"rope_type": "yarn", "factor": 8.0, "beta_fast": 8.0,
                                                  "beta_slow": 1.0, "truncate": False, "rope_theta": 10000.0,
                                                  "original_max_position_embeddings": 32})

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "llama4": ("Llama4TextConfig", "Llama4ForCausalLM", LLAMA4, "llama4"),
    "llama4_dense_layers": ("Llama4TextConfig", "Llama4ForCausalLM",
                            dict(LLAMA4, moe_layers=[0, 2], use_qk_norm=False), "llama4_text"),
    "aria_text": ("AriaTextConfig", "AriaTextForCausalLM",
                  dict(head_dim=16, moe_num_experts=4, moe_topk=2, intermediate_size=32, moe_num_shared_experts=2,
                       pad_token_id=0), "aria_text"),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", GPT_OSS, "gpt-oss"),
    "gpt_oss_no_attention_bias": ("GptOssConfig", "GptOssForCausalLM",
                                  dict(GPT_OSS, attention_bias=False, rope_parameters={"rope_type": "default",
                                                                                       "rope_theta": 500.0},
                                       layer_types=["full_attention", "sliding_attention", "sliding_attention"]),
                                  "gpt_oss"),
}
