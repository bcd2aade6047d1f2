"""RMSNorm: the reference matches Hugging Face's Llama norm; the dispatch picks the right kernel.

The dispatch (``rms_norm_kernel``) is tested with fake ``apex`` / ``torch_npu``
modules: on the CPU it is the reference, on CUDA it is apex's kernel when apex
is importable and the reference otherwise, on an NPU it is ``torch_npu``'s, and
``rms_norm`` calls the kernel the dispatch chose. A real fused kernel is
compared with the reference (values and gradients) only on a machine that has
one; elsewhere that test is skipped with the reason.
"""
from __future__ import annotations

import sys
import types
from typing import Callable, Iterator, List, Tuple

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from core.device import detect_device_type
from core.transformer import norms
from core.transformer.norms import rms_norm, rms_norm_kernel, rms_norm_reference


@pytest.fixture(autouse=True)
def fresh_dispatch() -> Iterator[None]:
    """Every test sees the dispatch decide again (and leaves no fake choice cached)."""
    rms_norm_kernel.cache_clear()
    yield
    rms_norm_kernel.cache_clear()


def _fake_kernel(calls: List[Tuple]) -> Callable[..., torch.Tensor]:
    def kernel(x: torch.Tensor, weight: torch.Tensor, *rest) -> torch.Tensor:
        calls.append(rest)
        return torch.full_like(x, 7.0)  # unlike any RMSNorm output
    return kernel


def _install_fake_apex(monkeypatch, calls: List[Tuple]) -> None:
    fused = types.ModuleType("apex.normalization.fused_layer_norm")
    fused.fused_rms_norm_affine = _fake_kernel(calls)
    monkeypatch.setitem(sys.modules, "apex", types.ModuleType("apex"))
    monkeypatch.setitem(sys.modules, "apex.normalization", types.ModuleType("apex.normalization"))
    monkeypatch.setitem(sys.modules, "apex.normalization.fused_layer_norm", fused)


def _install_fake_torch_npu(monkeypatch, calls: List[Tuple]) -> None:
    fake = types.ModuleType("torch_npu")
    kernel = _fake_kernel(calls)
    fake.npu_rms_norm = lambda x, weight, epsilon: (kernel(x, weight, epsilon), None)  # (y, rstd)
    monkeypatch.setitem(sys.modules, "torch_npu", fake)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reference_equals_hf_llama_rmsnorm(dtype):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 64, dtype=dtype)
    hf = LlamaRMSNorm(64, eps=1e-6).to(dtype)
    with torch.no_grad():
        hf.weight.copy_(torch.randn(64))
    assert torch.equal(rms_norm_reference(x, hf.weight, 1e-6), hf(x))


def test_cpu_uses_the_reference(monkeypatch):
    _install_fake_apex(monkeypatch, [])  # even with apex importable, the CPU has no fused kernel
    _install_fake_torch_npu(monkeypatch, [])
    assert rms_norm_kernel("cpu") == ("reference", rms_norm_reference)
    x, weight = torch.randn(2, 3, 16), torch.randn(16)
    assert torch.equal(rms_norm(x, weight, 1e-5), rms_norm_reference(x, weight, 1e-5))


def test_cuda_uses_apex_when_installed(monkeypatch):
    calls: List[Tuple] = []
    _install_fake_apex(monkeypatch, calls)
    name, kernel = rms_norm_kernel("cuda")
    assert name == "apex"
    kernel(torch.randn(2, 16), torch.randn(16), 1e-5)
    assert calls == [((16,), 1e-5)]  # normalized_shape is the last dim, eps passed through


def _block(monkeypatch, *modules: str) -> None:
    """Make ``import`` of these modules raise ImportError, as on a machine without them."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_cuda_without_apex_uses_the_reference(monkeypatch):
    _block(monkeypatch, "apex", "apex.normalization", "apex.normalization.fused_layer_norm")
    assert rms_norm_kernel("cuda")[0] == "reference"


def test_npu_uses_torch_npu_when_installed(monkeypatch):
    calls: List[Tuple] = []
    _install_fake_torch_npu(monkeypatch, calls)
    _install_fake_apex(monkeypatch, [])  # apex is for CUDA only
    name, kernel = rms_norm_kernel("npu")
    assert name == "npu"
    kernel(torch.randn(2, 16), torch.randn(16), 1e-6)
    assert calls == [(1e-6,)]
    _block(monkeypatch, "torch_npu")
    rms_norm_kernel.cache_clear()
    assert rms_norm_kernel("npu")[0] == "reference"


def test_rms_norm_calls_the_chosen_kernel(monkeypatch):
    """Pretend CPU tensors live on a CUDA device with apex: ``rms_norm`` must use the fake kernel."""
    calls: List[Tuple] = []
    _install_fake_apex(monkeypatch, calls)
    monkeypatch.setitem(norms.FUSED_KERNELS, "cpu", norms.FUSED_KERNELS["cuda"])
    out = rms_norm(torch.randn(2, 3, 16), torch.randn(16), 1e-5)
    assert calls == [((16,), 1e-5)]
    assert bool((out == 7.0).all())


def test_fused_kernel_matches_reference_on_this_device():
    device = torch.device(detect_device_type())
    name, kernel = rms_norm_kernel(device.type)
    if name == "reference":
        pytest.skip(f"no fused RMSNorm kernel on this machine ({device.type}; one needs apex on CUDA or torch_npu "
                    "on an NPU): the reference is what runs here, and the fake-kernel tests above cover the dispatch")
    for dtype, tolerance in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        torch.manual_seed(1)
        x = torch.randn(4, 7, 128, device=device, dtype=dtype, requires_grad=True)  # [b, s, h]
        weight = torch.randn(128, device=device, dtype=dtype, requires_grad=True)
        grad_out = torch.randn(4, 7, 128, device=device, dtype=dtype)
        results = []
        for fn in (kernel, rms_norm_reference):
            out = fn(x, weight, 1e-5)
            grads = torch.autograd.grad(out, (x, weight), grad_out)
            results.append((out, *grads))
        for ours, expected, what in zip(results[0], results[1], ("output", "grad x", "grad weight")):
            torch.testing.assert_close(ours.float(), expected.float(), rtol=tolerance, atol=tolerance,
                                       msg=lambda m: f"{name} {dtype} {what}: {m}")
