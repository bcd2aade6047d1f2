"""FP4 linears (``--fp4-format e2m1 --fp4-recipe nvfp4|mxfp4``): each GEMM against a reference written out here,
the stochastic rounding of gradients, the Hadamard transform of the weight gradient, and the flags.

The FP4 GEMMs are emulated (dequantised operands, fp32 products), as FP8's are on the CPU.
"""
from __future__ import annotations

import pytest
import torch

from core.quantization.formats import E2M1, mx_dequantize, mx_quantize
from core.quantization.fp8 import (GRAD, INPUT, Fp8Recipe, check_blocks, fp8_linear, hadamard_signs,
                                   hadamard_tokens, quantize_along)
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

NVFP4 = Fp8Recipe("e2m1", "nvfp4")
MXFP4 = Fp8Recipe("e2m1", "mxfp4")
BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--micro-batch-size", "1", "--train-iters", "2", "--lr", "1e-3", "--mock-data", "--vocab-size", "128"]


def reference_nvfp4(t: torch.Tensor, block_rows: int) -> torch.Tensor:
    """NVFP4 by the definition: blocks of ``block_rows`` x 16 (1 x 16 for activations, 16 x 16 for weights), each
    scale amax/6 cast to E4M3 (torch's cast) under the tensor scale amax/(6*448), elements E2M1 to nearest even."""
    rows, cols = t.shape
    tensor_scale = t.abs().max() / (6.0 * 448.0)
    out = torch.empty_like(t)
    for r in range(0, rows, block_rows):
        for c in range(0, cols, 16):
            block = t[r:r + block_rows, c:c + 16]
            wanted = (block.abs().max() / 6.0 / tensor_scale).clamp(min=2.0 ** -6, max=448.0)
            block_scale = wanted.to(torch.float8_e4m3fn).float()
            elements = E2M1.quantize(block * ((1.0 / tensor_scale) / block_scale))
            out[r:r + block_rows, c:c + 16] = elements * (block_scale * tensor_scale)
    return out


def test_nvfp4_forward_and_data_gradient_equal_the_definition() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(8, 64, generator=generator)
    weight = (torch.randn(32, 64, generator=generator) * 0.1).requires_grad_(True)
    x.requires_grad_(True)
    y = fp8_linear(x, weight, NVFP4)
    x_q, w_q = reference_nvfp4(x, 1), reference_nvfp4(weight.detach(), 16)  # activations 1 x 16, weights 16 x 16
    torch.testing.assert_close(y, x_q @ w_q.t(), rtol=1e-6, atol=1e-6)
    grad = torch.zeros(8, 32)
    grad[0, 0] = 1.0  # one exactly representable gradient: stochastic rounding keeps it
    y.backward(grad)
    torch.testing.assert_close(x.grad, grad @ w_q, rtol=0, atol=0)  # the same 16 x 16 weight blocks serve dgrad


def test_mxfp4_forward_equals_the_ocp_cast() -> None:
    generator = torch.Generator().manual_seed(1)
    x, weight = torch.randn(8, 64, generator=generator), torch.randn(16, 64, generator=generator)
    expected = mx_dequantize(*mx_quantize(x, E2M1)) @ mx_dequantize(*mx_quantize(weight, E2M1)).t()
    torch.testing.assert_close(fp8_linear(x, weight, MXFP4), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("recipe", [NVFP4, MXFP4], ids=["nvfp4", "mxfp4"])
def test_gradients_round_stochastically_and_without_bias(recipe: Fp8Recipe) -> None:
    """A gradient between two grid points lands on either, as often as its distance says; inputs round to
    nearest, the same every time."""
    values = torch.full((4, 64), 0.7)  # between E2M1's 0.5 and 1 after any power-of-two block scale
    values[:, ::16] = 4.0  # sets each block's amax
    # seeded, and enough draws that 5 % of 0.7 is over 6 standard deviations of a mean (0.5 * sqrt(0.24 / 2000)):
    # with 400 the 240 elements at 0.7 each missed by 3 sigma now and then, depending on the RNG's state
    torch.manual_seed(11)
    draws = torch.stack([quantize_along(values, 1, recipe, GRAD).dequantised() for _ in range(2000)])
    assert draws[:, 0, 1].unique().numel() == 2
    torch.testing.assert_close(draws.mean(dim=0), values, rtol=0.05, atol=0)
    inputs = torch.stack([quantize_along(values, 1, recipe, INPUT).dequantised() for _ in range(3)])
    assert (inputs == inputs[0]).all() and not torch.equal(inputs[0], values)


def test_the_hadamard_transform_keeps_the_weight_gradient() -> None:
    transform = hadamard_signs(torch.device("cpu"))
    torch.testing.assert_close(transform @ transform.t(), torch.eye(16), rtol=0, atol=1e-6)
    assert not torch.equal(transform.abs(), torch.full((16, 16), 0.25)) or (transform < 0).any()
    generator = torch.Generator().manual_seed(2)
    grad, x = torch.randn(40, 8, generator=generator), torch.randn(40, 12, generator=generator)  # 40: padded to 48
    mixed = hadamard_tokens(grad, transform).t() @ hadamard_tokens(x, transform)
    torch.testing.assert_close(mixed, grad.t() @ x, rtol=1e-5, atol=1e-5)


def test_the_weight_gradient_multiplies_the_transformed_quantised_operands() -> None:
    """wgrad = Q(H g)^T Q(H x): replayed with the same random draws (the data gradient's rounding comes first)."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(24, 32, generator=generator).requires_grad_(True)
    weight = (torch.randn(16, 32, generator=generator) * 0.1).requires_grad_(True)
    grad = torch.randn(24, 16, generator=generator)
    torch.manual_seed(5)
    fp8_linear(x, weight, NVFP4).backward(grad)
    torch.manual_seed(5)
    quantize_along(grad, 1, NVFP4, GRAD)  # the data gradient's draws
    transform = hadamard_signs(torch.device("cpu"))
    g_q = quantize_along(hadamard_tokens(grad, transform), 0, NVFP4, GRAD).dequantised()
    x_q = quantize_along(hadamard_tokens(x.detach(), transform), 0, NVFP4, INPUT).dequantised()
    torch.testing.assert_close(weight.grad, g_q.t() @ x_q, rtol=1e-6, atol=1e-6)
    plain = grad.t() @ x.detach()
    assert (weight.grad - plain).norm() < 0.3 * plain.norm()  # FP4 is coarse, not wrong


@pytest.mark.parametrize("extra, expected", [
    (["--fp4-recipe", "mxfp4"], "add --fp4-format e2m1 or drop it"),
    (["--fp4-format", "e2m1", "--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"], "keep one"),
    (["--fp4-format", "e2m1", "--fp16"], "drop --fp16"),
])
def test_bad_fp4_flags_are_refused_in_one_line(extra, expected) -> None:
    with pytest.raises((ArgumentError, ValueError)) as info:
        validate_args(parse_args(BASE + extra), 1)
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_block_sizes_are_checked() -> None:
    with pytest.raises(ValueError, match="--fp4-recipe nvfp4: layer is \\[24, 40\\], a dimension not divisible by 16"):
        check_blocks(NVFP4, (24, 40), None, (), "layer")
    with pytest.raises(ValueError, match="not a multiple of the 32-element blocks"):
        check_blocks(MXFP4, (64, 64), "out", (16, 16), "layer")
    check_blocks(NVFP4, (32, 48), "out", (16,), "layer")


def test_first_last_layers_in_bf16_serve_fp4() -> None:
    args = parse_args(BASE + ["--fp4-format", "e2m1", "--first-last-layers-bf16"])
    validate_args(args, 1)
