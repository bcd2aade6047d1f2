"""Parity cases of the hybrid state-space families (merged into ``test_zoo_parity.CASES``).

Nemotron-H with every block type (Mamba2, attention, MLP, MoE) in one stack: Mamba2 with 2 groups over 8
heads, a chunk of 5 over 12 tokens, dt clamped to ``time_step_limit`` (0.1, 0.7), which bites on both sides
(the parity test fails with either bound dropped); attention without positions with 2 KV heads; squared-ReLU
MLP; a sigmoid router with 2 groups (one kept), a scaling factor and a shared expert; untied.
``initializer_range`` 0.2 makes B, C and the dt projection large enough that dt (transformers 5.25 initialises
dt_bias to the inverse softplus of 0.001..0.1) spreads over the clamp and visibly moves the loss, so the
training test sees every gradient. A second case says tie_word_embeddings (which transformers ignores for
this family), has one Mamba group (replicated at TP 2), no MoE, and 6 Mamba heads of 16: 96 channels, not a
multiple of the hidden 64 (``--mamba-num-heads``).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple


NEMOTRON_H = dict(mamba_num_heads=8, mamba_head_dim=16, n_groups=2, ssm_state_size=8, chunk_size=5, conv_kernel=4,
                  head_dim=16, initializer_range=0.2)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "nemotron_h": ("NemotronHConfig", "NemotronHForCausalLM",
                   dict(NEMOTRON_H, layers_block_type=["mamba", "mamba", "attention", "mlp", "moe"],
                        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                        moe_shared_expert_intermediate_size=48, n_group=2, topk_group=1,
                        routed_scaling_factor=2.5, time_step_limit=(0.1, 0.7)), "nemotron_h"),
    "nemotron_h_one_group_tie_ignored": ("NemotronHConfig", "NemotronHForCausalLM",
                                  dict(NEMOTRON_H, n_groups=1, mamba_num_heads=6, tie_word_embeddings=True,
                                       vocab_size=101,
                                       layers_block_type=["attention", "mamba", "mlp"]), "nemotron_h"),
}
