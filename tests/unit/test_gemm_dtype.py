"""bf16 on a CPU without bf16 matrix units multiplies in fp32 (``core.device.gemm_dtype``).

Weights, activations and gradients stay bf16; only the products run in fp32, which PyTorch does far faster
than its reference bf16 kernel on such CPUs (AVX2-only machines) and more accurately. The choice follows the
CPU's flags; here it is forced both ways, and a dispatch mode records the dtype of every matrix product of a
training step to show which one ran.
"""
from __future__ import annotations

from typing import List, Set

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import core.device as device
from core.tensor_parallel.layers import linear
from mindspeed_llm.training.training import setup

PRODUCTS = {"mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention_for_cpu_backward"}
ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--position-embedding-type", "rope", "--normalization", "RMSNorm",
    "--swiglu", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "5", "--lr", "1e-2",
    "--attention-dropout", "0", "--hidden-dropout", "0", "--mock-data", "--tokenizer-type", "NullTokenizer",
    "--vocab-size", "64", "--seed", "5", "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--bf16",
]


class ProductDtypes(TorchDispatchMode):
    """Records the dtypes of the first operand of every matrix product and attention kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: Set[torch.dtype] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket.__name__ in PRODUCTS:
            self.dtypes.add(args[0].dtype if func.overloadpacket.__name__ != "addmm" else args[1].dtype)
        return func(*args, **(kwargs or {}))


@pytest.fixture
def units(monkeypatch):
    """Set whether the CPU has bf16 units: ``units(False)`` forces the fp32 products."""
    def force(present: bool) -> None:
        monkeypatch.setattr(device, "cpu_has_half_gemm_units", lambda dtype: present)
    return force


@pytest.mark.parametrize("flags, expected", [
    ("flags : fpu sse avx2 fma", False),
    ("flags : fpu avx2 avx512f avx512bw avx512_bf16", True),
    ("flags : fpu avx2 amx_bf16 amx_tile", True),
])
def test_units_follow_the_cpu_flags(monkeypatch, flags: str, expected: bool) -> None:
    monkeypatch.setattr(device, "_cpu_flags", lambda: flags)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    detected = {dtype: device._detect_half_gemm_units(dtype) for dtype in (torch.bfloat16, torch.float16)}
    assert detected[torch.bfloat16] is expected and detected[torch.float16] is False
    monkeypatch.setattr(device, "_CPU_HALF_GEMM_UNITS", detected)
    assert device.gemm_dtype(torch.ones(1, dtype=torch.bfloat16)) == (torch.bfloat16 if expected else torch.float32)
    assert device.gemm_dtype(torch.ones(1, dtype=torch.float16)) == torch.float32
    assert device.gemm_dtype(torch.ones(1)) == torch.float32


def test_linear_in_fp32_equals_the_fp32_product_rounded(units) -> None:
    units(False)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, 24, generator=generator).bfloat16().requires_grad_(True)
    w = torch.randn(40, 24, generator=generator).bfloat16().requires_grad_(True)
    b = torch.randn(40, generator=generator).bfloat16().requires_grad_(True)
    g = torch.randn(5, 3, 40, generator=generator).bfloat16()
    out = linear(x, w, b)
    out.backward(g)
    x32, w32, b32 = (t.detach().float().requires_grad_(True) for t in (x, w, b))
    expected = F.linear(x32, w32, b32)
    expected.backward(g.float())
    assert out.dtype == torch.bfloat16 and x.grad.dtype == w.grad.dtype == b.grad.dtype == torch.bfloat16
    assert torch.equal(out, expected.bfloat16())
    for ours, theirs in ((x.grad, x32.grad), (w.grad, w32.grad), (b.grad, b32.grad)):
        assert torch.equal(ours, theirs.bfloat16())


def test_fp32_input_with_a_bf16_weight_gives_fp32_outputs(units) -> None:
    """The loss's logits without bf16 units: an fp32 input keeps the product and its input gradient fp32."""
    units(False)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(6, 24, generator=generator).requires_grad_(True)
    w = torch.randn(40, 24, generator=generator).bfloat16().requires_grad_(True)
    g = torch.randn(6, 40, generator=generator)
    out = linear(x, w)
    out.backward(g)
    x32, w32 = x.detach().clone().requires_grad_(True), w.detach().float().requires_grad_(True)
    expected = F.linear(x32, w32)
    expected.backward(g)
    assert out.dtype == x.grad.dtype == torch.float32 and w.grad.dtype == torch.bfloat16
    assert torch.equal(out, expected) and torch.equal(x.grad, x32.grad) and torch.equal(w.grad, w32.grad.bfloat16())


@pytest.mark.parametrize("present", [True, False])
def test_the_plain_loss_reads_fp32_logits_without_units(units, monkeypatch, present: bool) -> None:
    """Without bf16 units the output layer's product is fp32 anyway, and its logits reach the loss unrounded."""
    import core.models.gpt_model as gpt_model
    units(present)
    seen: List[torch.dtype] = []
    original = gpt_model.vocab_parallel_cross_entropy
    monkeypatch.setattr(gpt_model, "vocab_parallel_cross_entropy",
                        lambda logits, *a, **k: seen.append(logits.dtype) or original(logits, *a, **k))
    losses, _ = _train(ARGV + ["--cross-entropy-chunk-size", "0"])
    assert set(seen) == {torch.bfloat16 if present else torch.float32}
    chunked, _ = _train(ARGV)  # the default loss (logit chunks): the same losses up to bf16 rounding
    assert chunked[0] - min(chunked) > 0.03  # the steps move the loss ~40x more than the tolerance
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(chunked), rtol=0, atol=1e-3)


def _train(argv: List[str]) -> tuple:
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    recorder = ProductDtypes()
    with recorder:
        losses = [trainer.train_step(iterator).loss]
    losses += [trainer.train_step(iterator).loss for _ in range(4)]
    return losses, recorder.dtypes


MOE = ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "16", "--moe-grouped-gemm"]


@pytest.mark.parametrize("extra", [[], MOE], ids=["dense", "moe"])
def test_bf16_training_without_units_multiplies_in_fp32(units, extra: List[str]) -> None:
    learning = ["--seq-length", "32", "--max-position-embeddings", "32", "--global-batch-size", "4"]
    units(True)
    native, native_dtypes = _train(ARGV + learning + extra)
    units(False)
    raised, raised_dtypes = _train(ARGV + learning + extra)
    assert torch.bfloat16 in native_dtypes
    assert raised_dtypes == {torch.float32}, raised_dtypes
    # the 5 steps lower the loss by ~0.17; the two products' rounding moves it by <= 0.002
    assert native[0] - native[-1] > 0.1
    torch.testing.assert_close(torch.tensor(raised), torch.tensor(native), rtol=0, atol=6e-3)
