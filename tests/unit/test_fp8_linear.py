"""FP8 linears (``core/quantization/fp8.py``, the ``fp8`` model transform) on one process.

* Each recipe and format: the forward and both backward GEMMs equal a quantise -> dequantise -> fp32 GEMM
  reference written out here element group by element group (scales per tensor, per row, per 1 x 128 tile and
  128 x 128 block with power-of-two scales, per MX block of 32), bit for bit.
* Delayed scaling over three steps: each step's scales come from the amax history of the steps before.
* torchao's emulated Float8 training linear (its ``tensorwise`` recipe, E5M2 gradients, and ``rowwise``): equal.
* The transform quantises the decoder layers' column/row-parallel linears only, minus the layers
  ``--first-last-layers-bf16`` keeps.
* Bad input, one line each.

    python -m pytest tests/unit/test_fp8_linear.py -q
"""
from __future__ import annotations

import copy
import math
from typing import Callable, List

import pytest
import torch

from core.quantization import formats
from core.quantization.fp8 import DelayedScaling, Fp8Recipe, fp8_linear, update_delayed_scaling
from mindspeed_llm.arguments import ArgumentError, parse_args, transformer_config_from_args, validate_args
from mindspeed_llm.transforms.registry import build_transforms, whole_meta_model

try:
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
except ImportError:  # pragma: no cover - depends on the environment
    Float8LinearConfig = None

Cast = Callable[[torch.Tensor], torch.Tensor]


def cast_for(fmt: str, role: str) -> Cast:
    if fmt == "hif8":
        return lambda t: formats.hif8_quantize(t, saturate=True)
    element = formats.E5M2 if fmt == "hybrid" and role == "grad" else formats.E4M3
    return element.quantize


def fmax(fmt: str, role: str) -> float:
    if fmt == "hif8":
        return 15.0  # the top of HiF8's 3-mantissa-bit binades
    return (formats.E5M2 if fmt == "hybrid" and role == "grad" else formats.E4M3).max_value


def scaled(group: torch.Tensor, cast: Cast, top: float, power_of_two: bool) -> torch.Tensor:
    """One group of elements cast with the scale ``top / amax`` and multiplied back."""
    scale = top / group.abs().max().clamp(min=1e-12)  # torch's scalar / tensor, as torchao computes the scale
    if power_of_two:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return cast(group * scale) / scale


def reference_quantize(t: torch.Tensor, reduce_dim: int, fmt: str, recipe: str, role: str) -> torch.Tensor:
    """``t`` [rows, cols] quantised for a GEMM that reduces over ``reduce_dim``, group by group."""
    cast, top = cast_for(fmt, role), fmax(fmt, role)
    if recipe == "tensorwise":
        return scaled(t, cast, top, False)
    moved = t if reduce_dim == 1 else t.t()
    out = torch.empty_like(moved)
    if recipe == "rowwise":
        for row in range(moved.size(0)):
            out[row] = scaled(moved[row], cast, top, True)
    elif recipe == "blockwise":
        height = 128 if role == "weight" else 1
        for r in range(0, moved.size(0), height):
            for c in range(0, moved.size(1), 128):
                out[r:r + height, c:c + 128] = scaled(moved[r:r + height, c:c + 128], cast, top, True)
    else:  # mxfp8: the OCP rule, a power of two below amax / 2^emax
        element = formats.E5M2 if fmt == "hybrid" and role == "grad" else formats.E4M3
        for row in range(moved.size(0)):
            for c in range(0, moved.size(1), 32):
                block = moved[row, c:c + 32]
                amax = block.abs().max().item()
                shared = (math.floor(math.log2(amax)) - element.max_exponent) if amax > 0 else -127
                out[row, c:c + 32] = element.quantize(block / 2.0 ** shared) * 2.0 ** shared
    return out if reduce_dim == 1 else out.t()


CASES = [("e4m3", "tensorwise"), ("hybrid", "tensorwise"), ("hif8", "tensorwise"), ("e4m3", "rowwise"),
         ("hybrid", "rowwise"), ("e4m3", "blockwise"), ("hybrid", "blockwise"), ("e4m3", "mxfp8"), ("hybrid", "mxfp8")]


@pytest.mark.parametrize("fmt, recipe", CASES)
def test_each_gemm_equals_the_hand_written_reference(fmt: str, recipe: str) -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 36, 160, generator=generator)  # 72 tokens: partial tiles and MX blocks along the tokens
    weight = torch.randn(224, 160, generator=generator) * 0.05  # a partial 128 x 128 block each way
    grad_y = torch.randn(2, 36, 224, generator=generator)
    x_ = x.clone().requires_grad_(True)
    weight_ = weight.clone().requires_grad_(True)
    y = fp8_linear(x_, weight_, Fp8Recipe(fmt, recipe))
    y.backward(grad_y)
    rows, grads = x.reshape(-1, 160), grad_y.reshape(-1, 224)
    expected_y = reference_quantize(rows, 1, fmt, recipe, "input") @ reference_quantize(weight, 1, fmt, recipe,
                                                                                         "weight").t()
    expected_dx = reference_quantize(grads, 1, fmt, recipe, "grad") @ reference_quantize(weight, 0, fmt, recipe,
                                                                                         "weight")
    expected_dw = reference_quantize(grads, 0, fmt, recipe, "grad").t() @ reference_quantize(rows, 0, fmt, recipe,
                                                                                             "input")
    assert torch.equal(y.detach().reshape(-1, 224), expected_y)
    assert torch.equal(x_.grad.reshape(-1, 160), expected_dx)
    assert torch.equal(weight_.grad, expected_dw)
    unquantised = rows @ weight.t()
    assert not torch.equal(expected_y, unquantised)
    assert (expected_y - unquantised).abs().max() < 0.1 * unquantised.abs().max()


@pytest.mark.skipif(Float8LinearConfig is None, reason="torchao is not installed (pip install torchao)")
@pytest.mark.parametrize("name, fmt", [("tensorwise", "hybrid"), ("rowwise", "e4m3")])
def test_torchao_emulated_float8_linear_agrees(name: str, fmt: str) -> None:
    """torchao's tensorwise recipe casts gradients to E5M2 (our ``hybrid``); its rowwise keeps E4M3."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 48, bias=False)
    x = torch.randn(32, 64, requires_grad=True)
    config = Float8LinearConfig(**{**Float8LinearConfig.from_recipe_name(name).__dict__, "emulate": True})
    theirs = convert_to_float8_training(torch.nn.Sequential(copy.deepcopy(linear)), config=config)
    y = theirs(x)
    y.pow(2).sum().backward()
    their_dx, x.grad = x.grad.clone(), None
    weight = linear.weight.detach().clone().requires_grad_(True)
    ours = fp8_linear(x, weight, Fp8Recipe(fmt, name))
    ours.pow(2).sum().backward()
    torch.testing.assert_close(ours, y, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad, their_dx, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(weight.grad, theirs[0].weight.grad, rtol=1e-6, atol=1e-6)


BASE = ["--num-layers", "4", "--hidden-size", "128", "--ffn-hidden-size", "256", "--num-attention-heads", "4",
        "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "1", "--global-batch-size", "1",
        "--train-iters", "1", "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "64", "--device", "cpu", "--swiglu", "--normalization", "RMSNorm"]


def transforms_for(extra: List[str], world_size: int = 1):
    args = parse_args(BASE + extra)
    validate_args(args, world_size)
    return build_transforms(args, transformer_config_from_args(args)), args


def fp8_linear_names(extra: List[str]) -> List[str]:
    transforms, args = transforms_for(extra)
    model = whole_meta_model(transformer_config_from_args(args))
    for transform in transforms:
        transform.on_meta_model(model)
    return [name for name, module in model.named_modules() if getattr(module, "fp8", None) is not None]


def test_the_transform_quantises_the_decoder_linears_minus_the_bf16_layers(capsys) -> None:
    every = fp8_linear_names(["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"])
    assert len(every) == 16 and all(name.startswith("decoder.layers.") for name in every)
    assert "fp8: e4m3 tensorwise on 16 linears; the GEMMs are emulated" in capsys.readouterr().err
    middle = fp8_linear_names(["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--first-last-layers-bf16",
                               "--num-layers-at-end-in-bf16", "2"])
    assert sorted({name.split(".")[2] for name in middle}) == ["1"]
    assert fp8_linear_names([]) == []


@pytest.mark.parametrize("extra, world_size, fragment", [
    (["--fp8-format", "e4m3"], 1, "--fp8-format needs --fp8-recipe"),
    (["--fp8-recipe", "tensorwise"], 1, "--fp8-recipe needs --fp8-format"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--fp16"], 1, "drop --fp16"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--fp8-amax-history-len", "4"], 1,
     "--fp8-amax-history-len shape(s) --fp8-recipe delayed's scales"),
    (["--fp8-margin", "1"], 1, "this run's recipe is none (no FP8)"),
    (["--fp8-format", "hif8", "--fp8-recipe", "rowwise"], 1, "--fp8-format hif8 scales per tensor"),
    (["--first-last-layers-bf16"], 1, "--first-last-layers-bf16 keeps layers out of FP8"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--num-layers-at-start-in-bf16", "2"], 1,
     "--first-last-layers-bf16 keeps in high precision"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--ffn-hidden-size", "200"], 1, "not divisible by 32"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "blockwise", "--tensor-model-parallel-size", "2"], 2,
     "not a multiple of the 128-element blocks"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--num-experts", "4"], 1, "routed experts' GEMMs"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--lora-target-modules", "linear_qkv"], 1,
     "with LoRA/QLoRA"),
    (["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise", "--pipeline-model-parallel-size", "2",
      "--schedules-method", "zero-bubble"], 2, "zero-bubble"),
])
def test_bad_fp8_flags_are_one_line(extra: List[str], world_size: int, fragment: str) -> None:
    with pytest.raises((ArgumentError, ValueError)) as error:
        transforms_for(extra, world_size)
    assert fragment in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("fmt, algo, margin", [("hybrid", "most_recent", 0), ("e4m3", "max", 1), ("hif8", "max", 0)])
def test_delayed_scaling_follows_the_amax_history(fmt: str, algo: str, margin: int) -> None:
    """Three steps of one linear under --fp8-recipe delayed with a history of 2: the first step scales each tensor
    by its own amax (tensorwise), later steps by the history so far, ``target / amax / 2^margin``, the amax the
    newest entry or the history's max; the step's amaxes (forward and backward) enter the history after it."""
    recipe = Fp8Recipe(fmt, "delayed", amax_history_len=2, amax_compute_algo=algo, margin=margin)
    state = DelayedScaling(recipe)
    weight = (torch.randn(48, 64, generator=torch.Generator().manual_seed(1)) * 0.3).requires_grad_(True)
    history = {role: [] for role in ("input", "weight", "grad")}
    for step, scale_x in enumerate((1.0, 4.0, 0.25)):  # the activations' range moves from step to step
        generator = torch.Generator().manual_seed(10 + step)
        x = (torch.randn(32, 64, generator=generator) * scale_x).requires_grad_(True)
        grad_y = torch.randn(32, 48, generator=generator) * 1e-3
        expected = {}
        for role in history:
            seen = history[role][-2:]
            if not seen:  # the first step: each tensor's own scale, as tensorwise
                expected[role] = lambda t, role=role: scaled(t, cast_for(fmt, role), fmax(fmt, role), False)
                continue
            amax = seen[-1] if algo == "most_recent" else max(seen)
            scale = torch.tensor(fmax(fmt, role)) / torch.tensor(amax) / 2.0 ** margin  # fp32, as the state
            expected[role] = lambda t, role=role, scale=scale: cast_for(fmt, role)(t * scale) / scale
        weight.grad = None
        y = fp8_linear(x, weight, recipe, delayed=state)
        y.backward(grad_y)
        torch.testing.assert_close(y, expected["input"](x) @ expected["weight"](weight).t(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(x.grad, expected["grad"](grad_y) @ expected["weight"](weight), rtol=1e-6,
                                   atol=1e-9)
        torch.testing.assert_close(weight.grad, expected["grad"](grad_y).t() @ expected["input"](x), rtol=1e-6,
                                   atol=1e-9)
        for role, tensor in (("input", x), ("weight", weight), ("grad", grad_y)):
            history[role].append(tensor.detach().abs().max().item())
        update_delayed_scaling([state], ())
    assert state.history.shape == (3, 2)
