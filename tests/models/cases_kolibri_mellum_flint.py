"""Parity cases of Mellum, Flint and Kolibri-1 (``mindspeed_llm/models/families/kolibri_mellum_flint.py``, merged
into ``test_zoo_parity.CASES``).

Four experts, top-2 (so the tiny training test's tokens reach every expert), expert FFN 32, window 4 (the
12-token inputs slide). ``mellum``: sliding/full/sliding layers (every 2nd layer full), a linearly scaled RoPE
on the full layer and another plain base on the sliding ones, a leading dense layer, q/k/v/o biases.
``mellum_irregular``: full/sliding/full layers (an irregular pattern), plain RoPE bases, every layer sparse, the
top-k weights not renormalised, tied embeddings. ``flint``: sliding/full/sliding layers (the full layer NoPE),
attention sinks, sigmoid routing, a shared expert, one dense layer, biases. ``flint_defaults``: four layers with
FlintConfig's default layer pattern (full, full, sliding, full) and dense layers (0 and 1), the top-k weights
not renormalised. ``kolibri1``: sliding/full/sliding layers (the full layer NoPE), sandwich norms, a shared
expert, a perturbed ``e_score_correction_bias`` that changes the picks (ranked on the logits, not the sigmoid
scores), the top-k weights renormalised, a linearly scaled RoPE. ``kolibri1_defaults``: five layers with
Kolibri1Config's default layer pattern (the 5th full, NoPE), the top-k weights not renormalised.
``kolibri1_nope``: a window but every layer full (every layer NoPE), tied embeddings.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16, sliding_window=4)
S, F = "sliding_attention", "full_attention"

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "mellum": ("MellumConfig", "MellumForCausalLM",
               dict(MOE, layer_types=[S, F, S], mlp_layer_types=["dense", "sparse", "sparse"], attention_bias=True,
                    rope_parameters={F: {"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
                                     S: {"rope_type": "default", "rope_theta": 300.0}}), "mellum2"),
    "mellum_irregular": ("MellumConfig", "MellumForCausalLM",
                       dict(MOE, layer_types=[F, S, F], norm_topk_prob=False, tie_word_embeddings=True,
                            rope_parameters={F: {"rope_type": "default", "rope_theta": 700.0},
                                             S: {"rope_type": "default", "rope_theta": 90.0}}), "mellum"),
    "flint": ("FlintConfig", "FlintForCausalLM",
              dict(MOE, layer_types=[S, F, S], mlp_only_layers=[0], shared_expert_intermediate_size=48,
                   attention_bias=True, rope_parameters={"rope_type": "default", "rope_theta": 500.0}), "flint"),
    "flint_defaults": ("FlintConfig", "FlintForCausalLM",
                       dict(MOE, num_hidden_layers=4, shared_expert_intermediate_size=48, norm_topk_prob=False),
                       "flint"),
    "kolibri1": ("Kolibri1Config", "Kolibri1ForCausalLM",
                 dict(MOE, layer_types=[S, F, S], shared_expert_intermediate_size=48, norm_topk_prob=True,
                      rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}), "kolibri"),
    "kolibri1_defaults": ("Kolibri1Config", "Kolibri1ForCausalLM",
                          dict(MOE, num_hidden_layers=5, shared_expert_intermediate_size=48), "kolibri1"),
    "kolibri1_nope": ("Kolibri1Config", "Kolibri1ForCausalLM",
                      dict(MOE, layer_types=[F, F, F], shared_expert_intermediate_size=48, tie_word_embeddings=True,
                           rope_parameters={"rope_type": "default", "rope_theta": 300.0}), "kolibri1"),
}
