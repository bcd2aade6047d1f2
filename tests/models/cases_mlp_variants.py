"""Parity cases of the families with another MLP than SwiGLU (``mindspeed_llm/models/families/mlp_variants.py``),
merged into ``test_zoo_parity.CASES``: name -> (HF config class, HF model class, config overrides,
--model-type-hf).

``apertus``: xIELU (its alphas are perturbed like every weight) with q/k/v/o biases; ``bitnet``: the sub-norms
over the TP-split heads and FFN; Starcoder2 with a sliding window and without biases, Nemotron with q/k/v/o
biases only, grouped KV heads and a rotated share of 0.25, Jais2 with ReLU and MLP biases only.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "arcee": ("ArceeConfig", "ArceeForCausalLM", dict(head_dim=24), "arcee"),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", dict(attention_bias=True), "apertus"),
    "bitnet": ("BitNetConfig", "BitNetForCausalLM", dict(tie_word_embeddings=True), "bitnet"),
    "nanochat": ("NanoChatConfig", "NanoChatForCausalLM", dict(num_key_value_heads=2, final_logit_softcapping=5.0),
                 "nanochat"),
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
