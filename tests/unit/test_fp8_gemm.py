"""The FP8 linears' GEMM dispatch (``core/quantization/fp8_gemm.py``, ``--fp8-gemm``) on one process.

* ``torch._scaled_mm`` forced on the CPU: the forward and both backward GEMMs of an FP8 linear equal the emulation's
  to fp32 accumulation order (1e-5 of the largest entry) for tensorwise (e4m3, hybrid), delayed over three steps and
  rowwise, with native per-row scales (the CPU) and with scales applied after a unit-scale fp32 product (CUDA's
  way); sizes that are not multiples of 16 go through the padding; every GEMM is a ``_scaled_mm`` call.
* The choice: ``auto`` is the emulation on the CPU, ``_scaled_mm`` on a device with FP8 units for the recipes it
  serves; forcing it on blockwise, mxfp8 or hif8, or on a device it does not run on, is refused in one line.
* The run's notice names the backend.

    python -m pytest tests/unit/test_fp8_gemm.py -q
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import pytest
import torch

from core.device import Fp8Matmul, fp8_matmul
from core.quantization import fp8_gemm
from core.quantization.formats import E4M3, E5M2
from core.quantization.fp8 import DelayedScaling, Fp8Recipe, choose_gemm, fp8_linear, update_delayed_scaling
from core.quantization.fp8_gemm import EMULATED, SCALED_MM, choose_backend, scaled_mm_refusal
from mindspeed_llm.arguments import ArgumentError
from tests.unit.test_fp8_linear import fp8_linear_names, transforms_for

TOKENS, IN, OUT = 72, 160, 232  # the wgrad's K (72) and every GEMM's N of 232 are padded to multiples of 16
Results = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def linear_step(recipe: Fp8Recipe, step: int, delayed: Optional[DelayedScaling] = None) -> Results:
    """One FP8 linear's output, input gradient and weight gradient on step ``step``'s data (fp32)."""
    generator = torch.Generator().manual_seed(step)
    x = (torch.randn(2, TOKENS // 2, IN, generator=generator) * (1 + step)).requires_grad_(True)
    weight = (torch.randn(OUT, IN, generator=generator) * 0.05).requires_grad_(True)
    grad_y = torch.randn(2, TOKENS // 2, OUT, generator=generator) * 1e-3
    y = fp8_linear(x, weight, recipe, delayed=delayed)
    y.backward(grad_y)
    return y.detach(), x.grad, weight.grad


def assert_close_to_accumulation(ours: Results, reference: Results) -> None:
    for name, got, expected in zip(("y", "dx", "dw"), ours, reference):
        error = (got - expected).abs().max().item()
        assert error <= 1e-5 * expected.abs().max().item(), f"{name}: {error} against {expected.abs().max()}"


@pytest.fixture
def scaled_mm_calls(monkeypatch: pytest.MonkeyPatch) -> List[Tuple[torch.dtype, torch.dtype, Tuple[int, ...]]]:
    """Each ``torch._scaled_mm`` call's operand dtypes and ``scale_a`` shape."""
    calls = []
    real = torch._scaled_mm

    def counting(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        calls.append((a.dtype, b.dtype, tuple(scale_a.shape)))
        return real(a, b, scale_a, *args, **kwargs)

    monkeypatch.setattr(torch, "_scaled_mm", counting)
    return calls


@pytest.mark.parametrize("fmt, recipe", [("e4m3", "tensorwise"), ("hybrid", "tensorwise"), ("e4m3", "rowwise"),
                                         ("hybrid", "rowwise")])
@pytest.mark.parametrize("rowwise_fp32", [True, False], ids=["scales-in-gemm", "scales-after-fp32-gemm"])
def test_scaled_mm_equals_the_emulation(fmt: str, recipe: str, rowwise_fp32: bool, scaled_mm_calls,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fp8_gemm, "rowwise_scaled_mm_in_fp32", lambda device_type: rowwise_fp32)
    reference = linear_step(Fp8Recipe(fmt, recipe), 0)
    assert not scaled_mm_calls
    ours = linear_step(Fp8Recipe(fmt, recipe, gemm=SCALED_MM), 0)
    assert_close_to_accumulation(ours, reference)
    grad = E5M2.torch_dtype if fmt == "hybrid" else E4M3.torch_dtype
    per_row = recipe == "rowwise" and rowwise_fp32
    assert [(a, b) for a, b, _ in scaled_mm_calls] == [(E4M3.torch_dtype, E4M3.torch_dtype), (grad, E4M3.torch_dtype),
                                                       (grad, E4M3.torch_dtype)]  # forward, dgrad, wgrad
    assert [shape for _, _, shape in scaled_mm_calls] == ([(TOKENS, 1), (TOKENS, 1), (OUT, 1)] if per_row
                                                          else [()] * 3)


@pytest.mark.parametrize("fmt", ["e4m3", "hybrid"])
def test_scaled_mm_equals_the_emulation_under_delayed_scaling(fmt: str, scaled_mm_calls) -> None:
    """Three steps with a history of 2: the first step's own scales, then the history's."""
    states = {gemm: DelayedScaling(Fp8Recipe(fmt, "delayed", amax_history_len=2)) for gemm in (EMULATED, SCALED_MM)}
    for step in range(3):
        results = {gemm: linear_step(Fp8Recipe(fmt, "delayed", amax_history_len=2, gemm=gemm), step, state)
                   for gemm, state in states.items()}
        assert_close_to_accumulation(results[SCALED_MM], results[EMULATED])
        for state in states.values():
            update_delayed_scaling([state], ())
    torch.testing.assert_close(states[SCALED_MM].scale, states[EMULATED].scale, rtol=0, atol=0)
    assert len(scaled_mm_calls) == 9


CPU_FACTS = fp8_matmul("cpu")
FAST = Fp8Matmul(True, True, "NVIDIA H100 80GB HBM3 (compute capability 9.0)")
OLD = Fp8Matmul(False, False, "NVIDIA A100 (compute capability 8.0)", "FP8 GEMMs need compute capability 8.9 or newer")


def test_the_cpu_runs_scaled_mm_but_auto_emulates() -> None:
    assert CPU_FACTS.runs and not CPU_FACTS.fast
    for recipe in ("tensorwise", "delayed", "rowwise"):
        choice = choose_gemm(Fp8Recipe("e4m3", recipe), "auto", "cpu")
        assert choice.name == EMULATED and "on the CPU, no FP8 matrix units" in choice.why
        assert choose_gemm(Fp8Recipe("e4m3", recipe), "scaled_mm", "cpu").name == SCALED_MM


@pytest.mark.parametrize("fmt, recipe, expected", [
    ("e4m3", "tensorwise", SCALED_MM), ("hybrid", "tensorwise", SCALED_MM), ("hybrid", "delayed", SCALED_MM),
    ("e4m3", "rowwise", SCALED_MM), ("hybrid", "rowwise", SCALED_MM), ("e4m3", "blockwise", EMULATED),
    ("hybrid", "mxfp8", EMULATED), ("hif8", "tensorwise", EMULATED), ("hif8", "delayed", EMULATED)])
def test_auto_on_fp8_units_serves_the_per_tensor_and_rowwise_recipes(fmt: str, recipe: str, expected: str) -> None:
    choice = choose_backend("auto", Fp8Recipe(fmt, recipe).scaled_mm_refusal(), facts=FAST)
    assert choice.name == expected
    assert choose_backend("auto", Fp8Recipe(fmt, recipe).scaled_mm_refusal(), facts=OLD).name == EMULATED
    assert choose_backend("emulated", None, facts=FAST).name == EMULATED


@pytest.mark.parametrize("fmt, recipe, fragment", [
    ("e4m3", "blockwise", "block scales are not fed to torch._scaled_mm"),
    ("hybrid", "mxfp8", "block scales are not fed to torch._scaled_mm"), ("hif8", "tensorwise", "HiF8 has no torch")])
def test_forcing_scaled_mm_where_it_cannot_serve_is_refused(fmt: str, recipe: str, fragment: str) -> None:
    for make in (lambda: Fp8Recipe(fmt, recipe, gemm=SCALED_MM), lambda: choose_gemm(Fp8Recipe(fmt, recipe),
                                                                                        SCALED_MM, "cpu")):
        with pytest.raises(ValueError) as error:
            make()
        message = str(error.value)
        assert message.startswith("--fp8-gemm scaled_mm: ") and fragment in message and "\n" not in message
        assert message.endswith("use --fp8-gemm auto or emulated")


def test_scaled_mm_on_a_device_without_it_is_refused_and_pairs_it_refuses_are_named() -> None:
    with pytest.raises(ValueError, match=r"^--fp8-gemm scaled_mm: torch._scaled_mm does not run on NVIDIA A100"):
        choose_backend("scaled_mm", None, facts=OLD)
    assert "does not multiply e5m2 by e5m2" in scaled_mm_refusal("tensorwise", [(E4M3, E4M3), (E5M2, E5M2)])
    for fmt in ("e4m3", "hybrid"):
        assert all(pair in fp8_gemm.SCALED_MM_PAIRS for pair in Fp8Recipe(fmt, "tensorwise").gemm_pairs())


@pytest.mark.parametrize("extra, fragment", [
    (["--fp8-gemm", "scaled_mm"], "--fp8-gemm scaled_mm picks the FP8 linears' GEMMs; this run has no FP8 recipe"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--fp8-gemm", "scaled_mm"],
     "--fp8-gemm scaled_mm: the blockwise recipe's block scales"),
    (["--fp8-format", "hif8", "--fp8-recipe", "delayed", "--fp8-gemm", "scaled_mm"], "HiF8 has no torch dtype"),
])
def test_bad_gemm_flags_are_one_line(extra: List[str], fragment: str) -> None:
    with pytest.raises((ArgumentError, ValueError)) as error:
        transforms_for(extra)
    assert fragment in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("extra, expected", [
    ([], "the GEMMs are emulated (quantise, dequantise, fp32 product): on the CPU, no FP8 matrix units"),
    (["--fp8-gemm", "emulated"], "the GEMMs are emulated (quantise, dequantise, fp32 product): --fp8-gemm emulated"),
    (["--fp8-gemm", "scaled_mm"], "the GEMMs run through torch._scaled_mm: --fp8-gemm scaled_mm on the CPU"),
])
def test_the_notice_names_the_backend(extra: List[str], expected: str, capsys) -> None:
    transforms, _ = transforms_for(["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"] + extra)
    assert f"fp8: e4m3 tensorwise on 16 linears; {expected}" in capsys.readouterr().err
    assert transforms[0].recipe.gemm == (SCALED_MM if "scaled_mm" in extra else EMULATED)
    assert len(fp8_linear_names(["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"] + extra)) == 16
