"""Parity cases of the mixture-of-experts families (merged into ``test_zoo_parity.CASES``).

Four experts, top-2 (so the tiny training test's tokens reach every expert), expert FFN 32.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32, head_dim=16), "mixtral"),
}
