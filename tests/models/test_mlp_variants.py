"""Registry details of the MLP-variant families (``mindspeed_llm/models/families/mlp_variants.py``) that the
parity cases do not reach: BitNet's refusal of quantised checkpoints, xIELU's constant buffers and NanoChat's
mirrored RoPE rows.

    python -m pytest tests/models/test_mlp_variants.py -q
"""
from __future__ import annotations

import pytest
import torch

from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import TRANSFORMS, RegistryError, TensorContext, config_from_hf

SIZES = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=256)


def test_bitnet_refuses_quantized_checkpoints() -> None:
    hf = dict(SIZES, model_type="bitnet", quantization_config={"quant_method": "bitnet"})
    with pytest.raises(RegistryError, match="bitnet quantization_config"):
        config_from_hf(hf, "bitnet")


def test_xielu_buffers_must_hold_the_decoder_constants() -> None:
    to_ours, to_hf = TRANSFORMS["xielu_alpha_p"]
    alpha = torch.tensor([0.3])
    assert to_ours([alpha, torch.tensor(0.5)], TensorContext()) is alpha
    assert torch.equal(to_hf(alpha, TensorContext())[1], torch.tensor(0.5))
    with pytest.raises(RegistryError, match="xIELU beta"):
        to_ours([alpha, torch.tensor(0.25)], TensorContext())


def test_nanochat_rope_mirror_is_its_own_inverse_and_leaves_v() -> None:
    cfg = TransformerConfig(num_layers=1, hidden_size=16, num_attention_heads=2, num_query_groups=1, vocab_size=8,
                            kv_channels=8)
    q, k, v = torch.randn(16, 16), torch.randn(8, 16), torch.randn(8, 16)
    ctx = TensorContext(split_sizes=(16, 8, 8), config=cfg)
    to_ours, to_hf = TRANSFORMS["qk_rope_mirrored"]
    fused = to_ours([q, k, v], ctx)  # [(np + 2 ng) hn, h]
    assert torch.equal(fused[:4], q[:4]) and torch.equal(fused[4:8], -q[4:8]) and torch.equal(fused[24:], v)
    assert all(torch.equal(a, b) for a, b in zip(to_hf(fused, ctx), (q, k, v)))
