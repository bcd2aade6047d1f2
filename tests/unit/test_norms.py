"""RMSNorm: the reference matches Hugging Face's Llama norm, and the dispatching function
matches the reference on whatever device (and fused kernel) this machine has."""
from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from core.device import detect_device_type
from core.transformer.norms import rms_norm, rms_norm_reference


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_equals_hf_llama_rmsnorm(dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 64, dtype=dtype)
    hf = LlamaRMSNorm(64, eps=1e-6).to(dtype)
    with torch.no_grad():
        hf.weight.copy_(torch.randn(64))
    assert torch.equal(rms_norm_reference(x, hf.weight, 1e-6), hf(x))


def test_dispatch_matches_reference_on_this_device():
    device = torch.device(detect_device_type())
    torch.manual_seed(1)
    x = torch.randn(4, 7, 128, device=device)
    weight = torch.randn(128, device=device)
    torch.testing.assert_close(rms_norm(x, weight, 1e-5), rms_norm_reference(x, weight, 1e-5),
                               rtol=1e-5, atol=1e-5)
