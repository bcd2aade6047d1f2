"""Parity cases of xLSTM (merged into ``test_zoo_parity.CASES``): every block an mLSTM and a SwiGLU MLP.

``xlstm``: 4 heads of q/k 16 and v 32 wide (hidden 128: transformers' cache needs ``hidden * qk_dim_factor`` a
multiple of 64), transformers' chunkwise kernel in chunks of 4 (12 tokens: three chunks), the MLP 2.667 x hidden
rounded up to 64 (384), the logits capped at 5. ``xlstm_wide_keys``: 2 heads with q/k wider than v
(``qk_dim_factor`` 1, ``v_dim_factor`` 0.5), the gates capped at 3, an MLP of 1.5 x hidden rounded to 16 (96),
transformers' recurrent path (its chunk of 64 exceeds the sequence).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "xlstm": ("xLSTMConfig", "xLSTMForCausalLM", dict(hidden_size=128, num_heads=4, chunk_size=4,
                                                      output_logit_soft_cap=5.0), "xlstm"),
    "xlstm_wide_keys": ("xLSTMConfig", "xLSTMForCausalLM",
                        dict(num_heads=2, qk_dim_factor=1.0, v_dim_factor=0.5, gate_soft_cap=3.0, ffn_proj_factor=1.5,
                             ffn_round_up_to_multiple_of=16), "xlstm"),
}
