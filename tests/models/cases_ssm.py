"""Parity cases of the state-space families (merged into ``test_zoo_parity.CASES``).

Mamba (tied, odd vocabulary, dt rank 'auto'), FalconMamba (dt/B/C norms, in/out biases, untied),
Mamba2 with 2 groups over 8 heads, a chunk of 5 over 12 tokens (a padded last chunk) and a dt limit,
and Mamba2 with one group (B/C replicated at TP 2, the gated norm's sum of squares shared over TP),
tied and without conv bias. ``LARGE_DT`` keeps every gradient of the training test visible. ``BASE``'s
attention sizes are ignored by these configs.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

# dt initialised larger than the defaults (0.001-0.1), so the tiny models' A_log and dt gradients are not ~0
LARGE_DT = dict(time_step_min=0.2, time_step_max=0.8)

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "mamba": ("MambaConfig", "MambaForCausalLM",
              dict(state_size=8, expand=2, conv_kernel=4, vocab_size=101, intermediate_size=128, **LARGE_DT), "mamba"),
    "falcon_mamba": ("FalconMambaConfig", "FalconMambaForCausalLM",
                     dict(state_size=6, expand=2, conv_kernel=3, time_step_rank=6, use_bias=True, mixer_rms_eps=1e-5,
                          tie_word_embeddings=False, intermediate_size=128), "falcon_mamba"),
    "mamba2": ("Mamba2Config", "Mamba2ForCausalLM",
               dict(state_size=8, expand=2, num_heads=8, head_dim=16, n_groups=2, chunk_size=5,
                    time_step_limit=(0.0, 2.0), **LARGE_DT), "mamba2"),
    "mamba2_one_group_tied": ("Mamba2Config", "Mamba2ForCausalLM",
                              dict(state_size=4, expand=2, num_heads=4, head_dim=32, n_groups=1, chunk_size=8,
                                   use_conv_bias=False, tie_word_embeddings=True, vocab_size=100), "mamba2"),
}
