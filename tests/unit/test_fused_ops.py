"""Fused kernels behind one dispatch each (``core/fused.py``).

* The compiled CPU path of RMSNorm, SwiGLU and RoPE is chosen with the flag (its name asserted), runs, and
  equals the reference forward and backward (fp32 1e-5, bf16 at bf16 tolerance); without the flag: the reference.
* Fake ``torch_npu`` / apex / ``flash_attn`` modules check the per-device choice and that the kernels get the
  arguments their packages expect; a fake ``flash_attn_func`` with flash-attn's documented semantics checks
  that attention through it equals the SDPA path (causal and sliding window) and that calls it cannot serve
  (documents) take the SDPA path.
* A compile failure warns once and runs the reference; ``--use-flash-attn`` on the CPU warns once and trains.
* A tiny model trained 20 steps with all four flags equals the model without them (fp32, 1e-4) and logs
  the choices in one line; a flag whose operation the model lacks fails in one line.

    python -m pytest -q tests/unit/test_fused_ops.py
"""
from __future__ import annotations

import sys
import types
import warnings
from typing import Callable, Iterator, List, Optional, Tuple

import pytest
import torch

from core.parallel_state import single_process_state
from core.transformer import attention as attention_module
from core import fused
from core.transformer.attention import SelfAttention, attention_kernel
from core.transformer.config import TransformerConfig
from core.transformer.mlp import swiglu_kernel, swiglu_reference
from core.transformer.norms import add_rms_norm_kernel, add_rms_norm_reference, rms_norm_kernel, rms_norm_reference
from core.transformer.rope import apply_rotary, rotary_kernel
from mindspeed_llm.training.training import run, setup

FLAGS = ["--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb", "--use-flash-attn"]


@pytest.fixture(autouse=True)
def fresh_dispatch() -> Iterator[None]:
    """Every test sees the dispatch decide again (and leaves no fake choice cached)."""
    fused.reset_choices()
    yield
    fused.reset_choices()


def _rms_inputs(dtype: torch.dtype) -> Tuple:
    return (torch.randn(4, 6, 64, dtype=dtype, requires_grad=True),
            torch.randn(64, dtype=dtype, requires_grad=True), 1e-5)


def _add_rms_inputs(dtype: torch.dtype) -> Tuple:
    return (torch.randn(4, 6, 64, dtype=dtype, requires_grad=True),
            torch.randn(4, 6, 64, dtype=dtype, requires_grad=True),
            torch.randn(64, dtype=dtype, requires_grad=True), 1e-5)


def _swiglu_inputs(dtype: torch.dtype) -> Tuple:
    return (torch.randn(6, 2, 2 * 48, dtype=dtype, requires_grad=True),)


def _rope_inputs(dtype: torch.dtype, rotary_dim: int = 16, interleaved: bool = False) -> Tuple:
    angles = torch.randn(6, 1, 1, rotary_dim)  # [s, 1, 1, rd]
    return (torch.randn(6, 2, 3, 16, dtype=dtype, requires_grad=True), angles.cos().to(dtype),
            angles.sin().to(dtype), interleaved)


CASES = {
    "rmsnorm": (rms_norm_kernel, rms_norm_reference, _rms_inputs),
    "add_rmsnorm": (add_rms_norm_kernel, add_rms_norm_reference, _add_rms_inputs),
    "swiglu": (swiglu_kernel, swiglu_reference, _swiglu_inputs),
    "rope": (rotary_kernel, apply_rotary, _rope_inputs),
    "rope_partial_interleaved": (rotary_kernel, apply_rotary,
                                 lambda dtype: _rope_inputs(dtype, rotary_dim=8, interleaved=True)),
}


def _forward_backward(fn: Callable, args: Tuple) -> List[torch.Tensor]:
    """The outputs (one tensor, or a tuple: add + RMSNorm) and the inputs' gradients under random output
    gradients."""
    args = tuple(a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                 for a in args)
    outs = fn(*args)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    torch.manual_seed(3)
    return [*outs, *torch.autograd.grad(outs, leaves, [torch.randn_like(out) for out in outs])]


@pytest.mark.parametrize("case,dtype,tolerance", [
    *((case, torch.float32, 1e-5) for case in sorted(CASES)),
    *((case, torch.bfloat16, 2e-2) for case in ("rmsnorm", "add_rmsnorm", "rope", "swiglu")),
])
def test_compiled_cpu_path_equals_the_reference(case: str, dtype: torch.dtype, tolerance: float) -> None:
    chooser, reference, inputs = CASES[case]
    assert chooser("cpu", False) == ("reference", reference)
    name, kernel = chooser("cpu", True)
    assert name == "compiled"
    torch.manual_seed(0)
    args = inputs(dtype)
    for ours, expected in zip(_forward_backward(kernel, args), _forward_backward(reference, args)):
        torch.testing.assert_close(ours, expected, rtol=tolerance, atol=tolerance)
    assert not kernel.failed and kernel.compile_seconds > 0  # it compiled and ran, no fallback


def test_compile_failure_warns_once_and_runs_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_compile(fn: Callable, **options: object) -> Callable:
        def compiled(*args: object) -> torch.Tensor:
            raise RuntimeError("no C compiler\nsecond line")
        return compiled
    monkeypatch.setattr(torch, "compile", broken_compile)
    name, kernel = swiglu_kernel("cpu", True)
    x = _swiglu_inputs(torch.float32)[0]
    with pytest.warns(RuntimeWarning, match=r"--use-fused-swiglu: torch.compile failed \(RuntimeError: no C "
                                            r"compiler\); using the reference"):
        first = kernel(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        second = kernel(x)
    assert name == "compiled" and kernel.failed
    assert torch.equal(first, swiglu_reference(x)) and torch.equal(second, first)


# ----------------------------------------------------------------------------- fake package kernels

def _install(monkeypatch: pytest.MonkeyPatch, name: str, **attributes: object) -> types.ModuleType:
    """A fake module ``name`` (and empty parents) holding ``attributes``."""
    parts = name.split(".")
    for depth in range(1, len(parts)):
        parent = ".".join(parts[:depth])
        if not isinstance(sys.modules.get(parent), types.ModuleType):
            monkeypatch.setitem(sys.modules, parent, types.ModuleType(parent))
    module = types.ModuleType(name)
    for key, value in attributes.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def _block(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def test_npu_kernels_with_torch_npu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[str] = []

    def rotary_mul(x: torch.Tensor, r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
        calls.append("rotary_mul")
        return apply_rotary(x, r1, r2)

    def swiglu(x: torch.Tensor, dim: int) -> torch.Tensor:
        calls.append(f"swiglu dim={dim}")
        return swiglu_reference(x)

    _install(monkeypatch, "torch_npu", npu_rotary_mul=rotary_mul, npu_swiglu=swiglu,
             npu_rms_norm=lambda x, w, epsilon: (rms_norm_reference(x, w, epsilon), None),
             npu_fusion_attention=lambda *args, **kwargs: calls.append(kwargs["input_layout"]) or (args[0],))
    assert rms_norm_kernel("npu", False)[0] == rms_norm_kernel("npu", True)[0] == "npu"  # today's default kept
    assert swiglu_kernel("npu", False)[0] == "reference" and rotary_kernel("npu", False)[0] == "reference"
    x, cos, sin, _ = _rope_inputs(torch.float32)
    name, kernel = rotary_kernel("npu", True)
    assert name == "npu" and torch.equal(kernel(x, cos, sin, False), apply_rotary(x, cos, sin))
    kernel(x, cos[..., :8], sin[..., :8], False)  # partial rotary: the reference, not the kernel
    kernel(x, cos, sin, True)  # interleaved: the reference
    name, kernel = swiglu_kernel("npu", True)
    assert name == "npu" and kernel(_swiglu_inputs(torch.float32)[0]).shape == (6, 2, 48)
    name, kernel = attention_kernel("npu", True)
    q = torch.randn(2, 4, 8, 16)
    assert name == "npu_fusion_attention" and kernel(q, q, q, 0.25, 0.0, None) is q
    assert kernel(q, q, q, 0.25, 0.0, 4) is None  # a sliding window: the SDPA path
    assert calls == ["rotary_mul", "swiglu dim=-1", "BNSD"]
    assert add_rms_norm_kernel("npu", False)[0] == "reference"
    name, kernel = add_rms_norm_kernel("npu", True)  # the add, then npu_rms_norm
    residual, branch, weight, eps = _add_rms_inputs(torch.float32)
    assert name == "npu"
    for ours, expected in zip(kernel(residual, branch, weight, eps), add_rms_norm_reference(residual, branch, weight, eps)):
        assert torch.equal(ours, expected)


def test_cuda_kernels_with_apex_and_flash_attn(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: List[Tuple] = []
    _install(monkeypatch, "apex.normalization.fused_layer_norm",
             fused_rms_norm_affine=lambda x, w, shape, eps: calls.append(("rms", shape, eps)) or x)
    _install(monkeypatch, "apex.transformer.functional",
             fused_apply_rotary_pos_emb_cached=lambda t, cos, sin: calls.append(("rope",)) or t)
    _install(monkeypatch, "flash_attn", flash_attn_func=_fake_flash_attn_func)
    assert rms_norm_kernel("cuda", True)[0] == "apex" and rotary_kernel("cuda", True)[0] == "apex"
    assert swiglu_kernel("cuda", True)[0] == "compiled"  # no package SwiGLU on CUDA
    assert attention_kernel("cuda", True)[0] == "flash_attn" and attention_kernel("cuda", False)[0] == "sdpa"
    x, cos, sin, _ = _rope_inputs(torch.float32)
    kernel = rotary_kernel("cuda", True)[1]
    assert kernel(x, cos, sin, False) is x  # apex served it
    per_sample = torch.randn(6, 2, 1, 16)  # position ids give [s, b, 1, rd]: apex cannot, the reference does
    torch.testing.assert_close(kernel(x, per_sample, per_sample, False), apply_rotary(x, per_sample, per_sample))
    rms_norm_kernel("cuda", True)[1](torch.randn(3, 32), torch.ones(32), 1e-6)
    assert calls == [("rope",), ("rms", (32,), 1e-6)]


def _fake_triton_rms_norm_fn(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                             residual: Optional[torch.Tensor] = None, eps: float = 1e-6,
                             prenorm: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """flash-attn's ``ops.triton.layer_norm.rms_norm_fn`` semantics: with ``prenorm`` it returns the norm of
    ``x + residual`` and that sum."""
    assert bias is None and residual is not None and prenorm
    total = x + residual
    return rms_norm_reference(total, weight, eps), total


def test_cuda_add_rms_norm_through_flash_attn_triton(monkeypatch: pytest.MonkeyPatch) -> None:
    _install(monkeypatch, "flash_attn.ops.triton.layer_norm", rms_norm_fn=_fake_triton_rms_norm_fn)
    assert add_rms_norm_kernel("cuda", False)[0] == "reference"
    name, kernel = add_rms_norm_kernel("cuda", True)
    assert name == "flash_attn"
    args = _add_rms_inputs(torch.float32)
    for ours, expected in zip(_forward_backward(kernel, args), _forward_backward(add_rms_norm_reference, args)):
        assert torch.equal(ours, expected)


def test_without_packages_cuda_compiles_and_attention_warns_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "apex", "apex.normalization", "apex.normalization.fused_layer_norm",
           "apex.transformer", "apex.transformer.functional", "flash_attn")
    assert rms_norm_kernel("cuda", False)[0] == "reference"
    assert rms_norm_kernel("cuda", True)[0] == rotary_kernel("cuda", True)[0] == "compiled"
    assert add_rms_norm_kernel("cuda", True)[0] == "compiled"
    with pytest.warns(RuntimeWarning, match="--use-flash-attn: no fused attention kernel on cuda; using sdpa"):
        assert attention_kernel("cuda", True)[0] == "sdpa"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert attention_kernel("cuda", True)[0] == "sdpa"  # decided once: no second warning


def _fake_flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float,
                          softmax_scale: Optional[float], causal: bool,
                          window_size: Tuple[int, int]) -> torch.Tensor:
    """flash-attn's documented semantics in plain PyTorch: q [b, s, n, hn], k/v [b, s, nkv, hn] (GQA: query
    head i reads KV head i // (n / nkv)); query i sees keys j <= i (causal) with i - j <= window_size[0]."""
    assert causal and dropout_p == 0.0 and q.stride(-1) == 1
    b, s, n, hn = q.shape
    k, v = (t.repeat_interleave(n // t.size(2), dim=2) for t in (k, v))
    scores = torch.einsum("bind,bjnd->bnij", q.float(), k.float()) * (softmax_scale or hn ** -0.5)
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    allowed = (j <= i) & ((window_size[0] < 0) | (i - j <= window_size[0]))
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return torch.einsum("bnij,bjnd->bind", probs, v.float()).to(q.dtype)


def _attention(window: Optional[int], flash: bool) -> SelfAttention:
    config = TransformerConfig(num_layers=1, hidden_size=32, num_attention_heads=4, num_query_groups=2,
                               vocab_size=64, normalization="RMSNorm", sliding_window=window,
                               attention_dropout=0.0, hidden_dropout=0.0, use_flash_attn=flash)
    torch.manual_seed(0)
    module = SelfAttention(config, single_process_state())
    for param in module.parameters():
        torch.nn.init.normal_(param, std=0.2)
    return module


@pytest.mark.parametrize("window", [None, 5])
def test_attention_through_flash_equals_sdpa(monkeypatch: pytest.MonkeyPatch, window: Optional[int]) -> None:
    """CPU tensors through CUDA's flash-attn choice (a fake; fp32 let through): same output and gradients."""
    seen: List[Tuple[int, int]] = []

    def flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: object) -> torch.Tensor:
        seen.append(kwargs["window_size"])
        return _fake_flash_attn_func(q, k, v, **kwargs)
    _install(monkeypatch, "flash_attn", flash_attn_func=flash)
    monkeypatch.setitem(attention_module.FLASH_ATTENTION.kernels, "cpu", attention_module.FLASH_ATTENTION.kernels["cuda"])
    monkeypatch.setattr(attention_module, "FLASH_ATTN_DTYPES", (torch.float32,))  # let fp32 through
    hidden = torch.randn(12, 2, 32)  # [s, b, h]
    results = []
    for flag in (True, False):
        module = _attention(window, flag)
        x = hidden.clone().requires_grad_(True)
        out = module(x, None)
        out.backward(torch.ones_like(out))
        results.append((out, x.grad, module.linear_qkv.weight.grad))
    for ours, expected in zip(*results):
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)
    assert seen == [(window - 1, 0) if window else (-1, -1)]


def test_flash_declines_what_it_cannot_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """fp32 (flash-attn computes in half precision) and document masks go to the SDPA path."""
    calls: List[int] = []
    _install(monkeypatch, "flash_attn", flash_attn_func=lambda *a, **k: calls.append(1))
    kernel = attention_module._flash_attn()
    q = torch.randn(1, 4, 8, 16)
    assert kernel(q, q, q, 0.25, 0.0, None) is None and not calls
    module = _attention(None, True)
    monkeypatch.setitem(attention_module.FLASH_ATTENTION.kernels, "cpu", ("flash_attn", lambda: kernel))
    positions = torch.arange(8)
    documents = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])  # [b, s]
    assert module._fused_attention(q, q, q, 0.0, whole_sequence=False) is None
    module._local_attention(q.permute(2, 0, 1, 3), q.permute(2, 0, 1, 3), q.permute(2, 0, 1, 3),
                            positions, positions, documents)
    assert not calls


# ----------------------------------------------------------------------------- training with the flags

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "16", "--max-position-embeddings", "16",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
    "--attention-dropout", "0", "--hidden-dropout", "0", "--micro-batch-size", "2", "--global-batch-size", "2",
    "--train-iters", "20", "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
    "--seed", "5", "--device", "cpu", "--num-workers", "0", "--log-interval", "20", "--eval-iters", "0",
]


def test_training_with_all_fused_flags_equals_without(capsys: pytest.CaptureFixture) -> None:
    plain = run(ARGV)
    with pytest.warns(RuntimeWarning, match="--use-flash-attn: no fused attention kernel on cpu; using sdpa"):
        with_flags = run(ARGV + FLAGS)
    log = capsys.readouterr().out
    assert ("fused kernels: rmsnorm=reference add_rmsnorm=reference swiglu=reference rope=reference "
            "attention=sdpa") in log
    assert "fused kernels: rmsnorm=compiled add_rmsnorm=compiled swiglu=compiled rope=compiled attention=sdpa" in log
    assert len(with_flags.losses) == 20
    torch.testing.assert_close(torch.tensor(with_flags.losses), torch.tensor(plain.losses), rtol=0, atol=1e-4)
    for (name, ours), (_, expected) in zip(with_flags.model.named_parameters(), plain.model.named_parameters()):
        torch.testing.assert_close(ours, expected, rtol=0, atol=1e-4, msg=lambda m: f"{name}: {m}")
    compiled = list(fused._COMPILED.values())  # RMSNorm, add + RMSNorm, SwiGLU and RoPE: compiled, and they ran
    assert len(compiled) == 4 and all(region.compile_seconds > 0 and not region.failed for region in compiled)


@pytest.mark.parametrize("swap,message", [
    (["--normalization", "LayerNorm", "--use-fused-rmsnorm"], "--use-fused-rmsnorm fuses RMSNorm"),
    (["--use-fused-swiglu", "--activation-func-clamp-value", "7"], "--use-fused-swiglu fuses plain SwiGLU"),
    (["--position-embedding-type", "learned_absolute", "--use-fused-rotary-pos-emb"],
     "--use-fused-rotary-pos-emb fuses RoPE"),
])
def test_a_flag_without_its_operation_fails_in_one_line(swap: List[str], message: str,
                                                       capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        setup(ARGV + swap)
    err = capsys.readouterr().err.strip()
    assert message in err and "drop the flag" in err and len(err.splitlines()) == 1, err


def test_bf16_training_with_every_fast_path_equals_the_plain_run() -> None:
    """Every speed path at once (the four fused-kernel flags, regional torch.compile, the chunked loss) in bf16
    against none of them: 20 steps agree within bf16 rounding."""
    plain = run(ARGV + ["--bf16", "--cross-entropy-chunk-size", "0"])
    with pytest.warns(RuntimeWarning, match="--use-flash-attn"):
        fast = run(ARGV + FLAGS + ["--bf16", "--use-torch-compile", "--cross-entropy-chunk-size", "16"])
    assert len(fast.losses) == len(plain.losses) == 20
    assert plain.losses[-1] < plain.losses[0] - 0.1, "the run must learn, or agreement proves little"
    # bf16 rounding moves the losses by ~1e-3; the run lowers them by ~0.12 (rtol 2e-2 would allow 0.09)
    torch.testing.assert_close(torch.tensor(fast.losses), torch.tensor(plain.losses), rtol=0, atol=5e-3)
