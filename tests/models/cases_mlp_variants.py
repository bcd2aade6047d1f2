"""Parity cases of the recent families (``mindspeed_llm/models/zoo_modern.py``), merged into
``test_zoo_parity.CASES``: name -> (HF config class, HF model class, config overrides, --model-type-hf).

``exaone4``: every 3rd layer full and without RoPE; ``exaone4_no_window``: every layer full and rotated;
``hyperclovax``: sandwich norms and all of Granite's multipliers; ``apertus``: xIELU (its alphas are
perturbed like every weight) with q/k/v/o biases; ``bitnet``: the sub-norms over the TP-split heads and FFN.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM",
                dict(head_dim=16, sliding_window=4, sliding_window_pattern=3,
                     layer_types=["sliding_attention", "sliding_attention", "full_attention"]), "exaone4"),
    "exaone4_no_window": ("Exaone4Config", "Exaone4ForCausalLM",
                          dict(sliding_window=None, tie_word_embeddings=True,
                               layer_types=["full_attention"] * 3), "exaone4"),
    "vaultgemma": ("VaultGemmaConfig", "VaultGemmaForCausalLM",
                   dict(head_dim=16, sliding_window=4, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                        final_logit_softcapping=3.0), "vaultgemma"),
    "hyperclovax": ("HyperCLOVAXConfig", "HyperCLOVAXForCausalLM",
                    dict(embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3,
                         logits_scaling=0.5), "hyperclovax"),
    "arcee": ("ArceeConfig", "ArceeForCausalLM", dict(head_dim=24), "arcee"),
    "apertus": ("ApertusConfig", "ApertusForCausalLM", dict(attention_bias=True), "apertus"),
    "bitnet": ("BitNetConfig", "BitNetForCausalLM", dict(tie_word_embeddings=True), "bitnet"),
    "nanochat": ("NanoChatConfig", "NanoChatForCausalLM", dict(num_key_value_heads=2, final_logit_softcapping=5.0),
                 "nanochat"),
}
CASES.update({
    # layers 0 full, 1-2 sliding (transformers' default layout); sinks perturbed like every weight; a second
    # RoPE base on the sliding layers
    "granite_swa": ("GraniteSWAConfig", "GraniteSWAForCausalLM",
                    dict(sliding_window=4, embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3,
                         logits_scaling=6.0, layer_rope_theta=[10000.0, 300.0, 300.0]), "granite_swa"),
    "granite_swa_nope": ("GraniteSWAConfig", "GraniteSWAForCausalLM",
                         dict(sliding_window=4, tie_word_embeddings=False, layer_rope_theta=[0, 5000.0, 5000.0]),
                         "granite_swa"),
})
