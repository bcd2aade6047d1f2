"""Parity cases of the parallel-residual families (mindspeed_llm/models/families/parallel_residual.py), merged into
tests/models/test_zoo_parity.py's CASES: GPT-NeoX (parallel and sequential, MLP-only biases), GPT-NeoX-Japanese
(a bias on the last layer's attention output only), GPT-J, CodeGen (two heads per mp_num block), Phi (with
q/k LayerNorms and GQA), Persimmon (ReLU squared, q/k LayerNorms) and Falcon (multi-query; new decoder
architecture with two or one norms; Falcon-RW's sequential per-head layout with biases).

BASE's ``intermediate_size``/``num_key_value_heads`` are ignored by the families that do not read them (they
are then extra keys of config.json, which the registry must ignore too).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(rope_parameters={"rope_type": "default",
                 "rope_theta": 500.0, "partial_rotary_factor": 0.25}), "gpt_neox"),
    "gpt_neox_sequential": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                            dict(use_parallel_residual=False, attention_bias=False, hidden_act="gelu_fast",
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                  "partial_rotary_factor": 0.5}), "gpt_neox"),
    "gpt_neox_japanese": ("GPTNeoXJapaneseConfig", "GPTNeoXJapaneseForCausalLM",
                          dict(intermediate_multiple_size=2, bos_token_id=0, eos_token_id=1,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                "partial_rotary_factor": 0.5}), "gpt_neox_japanese"),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", dict(rotary_dim=8, n_inner=96, bos_token_id=0, eos_token_id=1), "gptj"),
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM",
                dict(num_attention_heads=8, rotary_dim=4, bos_token_id=0, eos_token_id=1), "codegen"),
    "phi": ("PhiConfig", "PhiForCausalLM", dict(num_key_value_heads=4), "phi"),
    "phi_qk_layernorm_gqa": ("PhiConfig", "PhiForCausalLM", dict(qk_layernorm=True, hidden_act="gelu"), "phi"),
    "persimmon": ("PersimmonConfig", "PersimmonForCausalLM", dict(), "persimmon"),
    "falcon": ("FalconConfig", "FalconForCausalLM", dict(), "falcon"),
    "falcon_new_arch": ("FalconConfig", "FalconForCausalLM",
                        dict(new_decoder_architecture=True, num_kv_heads=2, bias=True, tie_word_embeddings=False),
                        "falcon"),
    "falcon_new_arch_one_norm": ("FalconConfig", "FalconForCausalLM",
                                 dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1),
                                 "falcon"),
    "falcon_rw": ("FalconConfig", "FalconForCausalLM",
                  dict(multi_query=False, parallel_attn=False, bias=True, activation="gelu_new"), "falcon"),
}
