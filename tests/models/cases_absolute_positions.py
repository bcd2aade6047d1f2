"""Parity cases of the absolute-position families (mindspeed_llm/models/families/absolute_positions.py).

Merged into ``tests/models/test_zoo_parity.CASES``; ``BASE`` there gives
hidden 64, 4 heads, 3 layers, vocabulary 128 and 256 positions (the keys a
family does not use are ignored by its HF config). In transformers 5.x OPT's
positions come from the attention mask (all ones here: 0..s-1), BioGpt's and
XGLM's and CTRL's from ``arange``, so the random tokens may contain ``pad_token_id``
without moving any position; XGLM zeroes sinusoidal row ``pad_token_id`` (1 by
default), below the offset 2, so no position reads it.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

NEO_TYPES = [[["global", "local"], 1], [["global"], 1]]  # layers: global, local, global

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_inner=96), "gpt2"),
    "gpt2_untied_unscaled": ("GPT2Config", "GPT2LMHeadModel",
                             dict(tie_word_embeddings=False, scale_attn_weights=False, activation_function="gelu",
                                  vocab_size=101), "gpt2"),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(multi_query=True), "gpt_bigcode"),
    "gpt_bigcode_mha": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", dict(multi_query=False, n_inner=96),
                        "gpt_bigcode"),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", dict(attention_types=NEO_TYPES, window_size=4), "gpt_neo"),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(ffn_dim=96), "opt"),
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", dict(intermediate_size=96), "biogpt"),
    "xglm": ("XGLMConfig", "XGLMForCausalLM", dict(ffn_dim=96), "xglm"),
    "ctrl": ("CTRLConfig", "CTRLLMHeadModel", dict(dff=96), "ctrl"),
}
# Variants: OPT without linear biases and with weightless LayerNorms (--disable-bias-linear --non-parametric-norm)
CASES["opt_no_bias_no_affine"] = ("OPTConfig", "OPTForCausalLM",
                                  dict(ffn_dim=96, enable_bias=False, layer_norm_elementwise_affine=False), "opt")
# BioGpt without the embedding scale, untied; XGLM untied with ReLU
CASES["biogpt_unscaled_untied"] = ("BioGptConfig", "BioGptForCausalLM",
                                   dict(intermediate_size=96, scale_embedding=False, tie_word_embeddings=False), "biogpt")
CASES["xglm_untied_relu"] = ("XGLMConfig", "XGLMForCausalLM",
                             dict(ffn_dim=96, tie_word_embeddings=False, activation_function="relu"), "xglm")
# CTRL untied (its lm_head keeps its bias)
CASES["ctrl_untied"] = ("CTRLConfig", "CTRLLMHeadModel", dict(dff=96, tie_word_embeddings=False), "ctrl")
