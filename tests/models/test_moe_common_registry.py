"""MoE families refuse the HF settings they cannot express, in one line naming the family and key.

    python -m pytest -q tests/models/test_moe_common_registry.py
"""
from __future__ import annotations

from typing import Any, Dict

import pytest

from mindspeed_llm.models.registry import RegistryError, config_from_hf

SIZES = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
             vocab_size=128, max_position_embeddings=256, moe_intermediate_size=32, num_experts_per_tok=2)
BAD = [
    ("mixtral", dict(model_type="mixtral", num_local_experts=4, router_jitter_noise=0.1), "router_jitter_noise"),
    ("qwen3_moe", dict(model_type="qwen3_moe", num_experts=4, decoder_sparse_step=2), "decoder_sparse_step=2"),
    ("qwen3_moe", dict(model_type="qwen3_moe", num_experts=4, mlp_only_layers=[1]), "mlp_only_layers=[1]"),
    ("qwen2_moe", dict(model_type="qwen2_moe", num_experts=4, shared_expert_intermediate_size=48,
                       use_sliding_window=True), "use_sliding_window"),
]


@pytest.mark.parametrize("family, hf, key", BAD, ids=[b[2] for b in BAD])
def test_unsupported_settings_are_refused(family: str, hf: Dict[str, Any], key: str) -> None:
    with pytest.raises(RegistryError) as error:
        config_from_hf({**SIZES, **hf}, family)
    assert key in str(error.value) and family in str(error.value) and "\n" not in str(error.value)


def test_leading_dense_layers_map_to_first_k_dense_replace() -> None:
    config = config_from_hf({**SIZES, "model_type": "qwen3_moe", "num_experts": 4, "mlp_only_layers": [0, 1]},
                            "qwen3-moe")
    assert config.first_k_dense_replace == 2 and [config.is_moe_layer(i) for i in range(3)] == [False, False, True]
    assert (config.ffn_hidden_size, config.moe_ffn_hidden_size, config.moe_router_pre_softmax) == (128, 32, True)
