"""Parity cases of the gated-attention MoE families (merged into ``test_zoo_parity.CASES``).

AFMoE: four experts, top-2, expert FFN 32, head dim 16; ``sliding_window`` 4 over 12 tokens, so the window
cuts. ``afmoe``: every second layer full (``--sliding-window-pattern 2``; the full layer is NoPE), the first
layer dense, one shared expert, ``route_scale`` 2.5; every weight is perturbed, the router's
``expert_bias`` too (a parameter in transformers), so the bias changes which experts are chosen.
``afmoe_mup``: an irregular ``layer_types`` (``--full-attention-layers 0``), no dense layer, two shared
experts, ``mup_enabled`` (embeddings times sqrt(hidden)), tied embeddings and another RoPE base.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

AFMOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16, sliding_window=4)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "afmoe": ("AfmoeConfig", "AfmoeForCausalLM",
              dict(AFMOE, num_dense_layers=1, num_shared_experts=1, global_attn_every_n_layers=2, route_scale=2.5),
              "afmoe"),
    "afmoe_mup": ("AfmoeConfig", "AfmoeForCausalLM",
                  dict(AFMOE, num_dense_layers=0, num_shared_experts=2, mup_enabled=True, tie_word_embeddings=True,
                       layer_types=["full_attention", "sliding_attention", "sliding_attention"],
                       rope_parameters={"rope_type": "default", "rope_theta": 500.0}),
                  "trinity"),
}
