"""Low-precision casts (``core/quantization/formats.py``) bit for bit against the references.

* E4M3 and E5M2 against ``torch``'s casts to ``float8_e4m3fn`` / ``float8_e5m2`` on every code, every midpoint
  between neighbours (where ties to even decide) and random values over the whole range, saturating and not.
* E8M0 codes against ``torch.float8_e8m0fnu``; the E2M1 table against torchao's.
* MXFP8 (E4M3, E5M2) and MXFP4 against torchao's reference ``to_mx`` (the OCP spec's floor scale) and NVFP4
  against torchao's ``nvfp4_quantize``: elements and scales equal (torchao is an optional test dependency).
* HiF8 against a table of codes written out here from the paper's field layout and Ascend's special codes,
  its rounding (half away from zero, the overflow threshold, the denormal steps) and encode/decode.
* Stochastic rounding: only the two neighbours, unbiased on average, reproducible from the generator.

    python -m pytest tests/unit/test_formats.py -q
"""
from __future__ import annotations

import math

import pytest
import torch

from core.quantization import formats
from core.quantization.formats import E2M1, E4M3, E5M2

try:  # torchao's MX reference casts (an optional test dependency)
    from torchao.prototype.mx_formats import mx_tensor as torchao_mx
    from torchao.prototype.mx_formats import nvfp4_tensor as torchao_nvfp4
    from torchao.prototype.mx_formats.kernels import f4_unpacked_to_f32, unpack_uint4
except ImportError:  # pragma: no cover - depends on the environment
    torchao_mx = None

needs_torchao = pytest.mark.skipif(torchao_mx is None, reason="torchao is not installed (pip install torchao)")


def every_code(dtype: torch.dtype) -> torch.Tensor:
    """The fp32 value of each of the 256 codes of an 8-bit torch dtype (NaNs dropped), sorted."""
    values = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype).float()
    return values[~torch.isnan(values)].sort().values


def probe_values(fmt: formats.FloatFormat) -> torch.Tensor:
    """Every finite value of ``fmt``, the midpoints between neighbours and a little either side of them,
    values past the largest, and random values log-uniform over the range and below it."""
    grid = every_code(fmt.torch_dtype)
    grid = grid[torch.isfinite(grid)]
    middles = (grid[1:] + grid[:-1]) / 2
    beyond = torch.tensor([fmt.max_value * k for k in (1.01, 1.0625, 1.125, 1.5, 2.0, 100.0)])
    generator = torch.Generator().manual_seed(0)
    exponents = torch.empty(20000).uniform_(-30, math.log2(fmt.max_value) + 1, generator=generator)
    random = torch.exp2(exponents) * torch.where(torch.rand(20000, generator=generator) < 0.5, -1.0, 1.0)
    return torch.cat([grid, middles, torch.nextafter(middles, middles + 1), torch.nextafter(middles, middles - 1),
                      beyond, -beyond, random])


@pytest.mark.parametrize("fmt", [E4M3, E5M2], ids=lambda f: f.name)
def test_fp8_casts_equal_torch_bit_for_bit(fmt: formats.FloatFormat) -> None:
    x = probe_values(fmt)
    expected = x.clamp(-fmt.max_value, fmt.max_value).to(fmt.torch_dtype).float()
    got = fmt.quantize(x)
    assert torch.equal(got.view(torch.int32), expected.view(torch.int32))  # -0.0 and 0.0 told apart too
    if fmt.has_inf:  # E5M2 without saturation: overflow is inf, as torch casts
        assert torch.equal(fmt.quantize(x, saturate=False), x.to(fmt.torch_dtype).float())
    else:  # E4M3 has no inf: overflow is NaN (torch's cast saturates instead)
        assert torch.isnan(fmt.quantize(torch.tensor([fmt.max_value * 1.07]), saturate=False)).all()
    special = fmt.quantize(torch.tensor([float("nan"), float("inf"), -float("inf")]))
    assert torch.isnan(special[0]) and special[1:].tolist() == [fmt.max_value, -fmt.max_value]


def test_e8m0_codes_equal_torch() -> None:
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    torch.testing.assert_close(formats.e8m0_decode(codes), codes.view(torch.float8_e8m0fnu).float(), equal_nan=True,
                               rtol=0, atol=0)
    exponents = torch.arange(-127, 128)
    assert torch.equal(formats.e8m0_encode(exponents),
                       torch.exp2(exponents.double()).float().to(torch.float8_e8m0fnu).view(torch.uint8))
    with pytest.raises(ValueError, match="-127..127"):
        formats.e8m0_encode(torch.tensor([128]))


def test_e2m1_grid_and_codes() -> None:
    values = formats.e2m1_values()
    assert torch.equal(formats.e2m1_decode(formats.e2m1_encode(values)), values)
    assert torch.equal(E2M1.quantize(values), values)  # every code is on the grid
    # ties to even between 2 and 3 (2.5 -> 2), 4 and 6 (5 -> 4), 0 and 0.5 (0.25 -> 0); saturation at 6
    assert E2M1.quantize(torch.tensor([2.5, 3.5, 5.0, 0.25, 0.75, 7.0, -9.0])).tolist() == [2, 4, 4, 0, 1, 6, -6]
    if torchao_mx is not None:
        assert torch.equal(f4_unpacked_to_f32(torch.arange(16, dtype=torch.uint8)), values)


def mx_inputs() -> torch.Tensor:
    """Blocks of very different ranges, a zero block and one with a single huge element."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(6, 128, generator=generator) * torch.exp2(torch.randint(-20, 20, (6, 1), generator=generator))
    x[0, :32] = 0.0
    x[1, 32:64] = 1e-3
    x[1, 40] = 3e4
    return x


@needs_torchao
@pytest.mark.parametrize("element", ["e4m3", "e5m2", "e2m1"])
def test_mx_casts_equal_torchao(element: str) -> None:
    fmt = formats.FORMATS[element]
    x = mx_inputs()
    elements, scales = formats.mx_quantize(x, fmt)
    torchao_dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1": torch.float4_e2m1fn_x2}[element]
    scale, data = torchao_mx.to_mx(x, torchao_dtype, 32)
    expected = (f4_unpacked_to_f32(unpack_uint4(data.view(torch.uint8))) if element == "e2m1"
                else data.float())
    assert torch.equal(scales, scale.view(torch.uint8).reshape(scales.shape))
    assert torch.equal(elements, expected.reshape(elements.shape))
    recovered = formats.mx_dequantize(elements, scales)
    assert (recovered - x).abs().max() <= x.abs().max() * 2.0 ** -fmt.mantissa_bits


@needs_torchao
def test_nvfp4_cast_equals_torchao() -> None:
    x = mx_inputs()
    elements, block_scale, tensor_scale = formats.nvfp4_quantize(x)
    expected_scale = torchao_nvfp4.per_tensor_amax_to_scale(x.abs().amax())
    scales, data = torchao_nvfp4.nvfp4_quantize(x, 16, expected_scale)
    assert torch.equal(tensor_scale, expected_scale)
    assert torch.equal(block_scale, scales.float().reshape(block_scale.shape))
    assert torch.equal(elements, f4_unpacked_to_f32(unpack_uint4(data)).reshape(elements.shape))


def test_block_casts_refuse_a_dimension_off_the_block() -> None:
    with pytest.raises(ValueError, match="divisible by the block of 32"):
        formats.mx_quantize(torch.ones(4, 48), E4M3)


# HiF8: (code, value) from the field layout: sign | dot prefix (11: D=4, 10: D=3, 01: D=2, 001: D=1, 0001: D=0,
# 0000: denormal) | exponent (sign, then the magnitude without its leading 1) | mantissa
HIF8_TABLE = [
    (0x00, 0.0), (0x08, 1.0), (0x09, 1.125), (0x0F, 1.875), (0x88, -1.0),  # 0_0001_mmm: e = 0
    (0x10, 2.0), (0x18, 0.5), (0x1C, 0.75),  # 0_001_s_mmm: e = +-1
    (0x20, 4.0), (0x28, 8.0), (0x30, 0.25), (0x38, 0.125), (0x3F, 1.875 / 8),  # 0_01_s m_mmm: e = +-2, +-3
    (0x40, 16.0), (0x4F, 1.75 * 128), (0x50, 2.0 ** -4), (0x5F, 1.75 * 2.0 ** -7),  # 0_10_s mm_mm: e = +-4..7
    (0x60, 256.0), (0x61, 384.0), (0x6E, 32768.0), (0x70, 2.0 ** -8), (0x7F, 1.5 * 2.0 ** -15),  # e = +-8..15
    (0x01, 2.0 ** -22), (0x04, 2.0 ** -19), (0x07, 2.0 ** -16),  # 0_0000_mmm: 2^(m - 23)
    (0x6F, float("inf")), (0xEF, float("-inf")),  # Ascend's inf codes (the slot of 1.5 x 2^15)
]


def test_hif8_codes_follow_the_paper_s_table() -> None:
    codes = torch.tensor([code for code, _ in HIF8_TABLE], dtype=torch.uint8)
    values = torch.tensor([value for _, value in HIF8_TABLE])
    assert torch.equal(formats.hif8_decode(codes), values)
    assert torch.isnan(formats.hif8_decode(torch.tensor([0x80], dtype=torch.uint8))).all()
    assert torch.equal(formats.hif8_encode(values), codes)
    finite = formats.hif8_decode(torch.arange(256, dtype=torch.int32).to(torch.uint8))
    finite = finite[torch.isfinite(finite)]
    assert finite.numel() == finite.unique().numel() == 253  # +-126 values and one zero (-0's slot is NaN)
    assert torch.equal(formats.hif8_quantize(finite), finite)  # every code is on the grid
    binades = torch.unique(torch.floor(torch.log2(finite[finite > 0])))
    assert binades.numel() == 38 and binades.min() == -22 and binades.max() == 15  # 7 + 8 + 16 + 7 binades


def test_hif8_rounds_half_away_and_overflows_at_40960() -> None:
    x = torch.tensor([1.0625, 1.0624, 1.1875, 3.0 * 2 ** -24, 2.0 ** -23, 2.0 ** -23 * 0.999, 1.5 * 2 ** -17,
                      24.0 * 1.125, 40960.0, 40959.0, 1e9, -40960.0])
    expected = [1.125, 1.0, 1.25, 2.0 ** -22, 2.0 ** -22, 0.0, 2.0 ** -16, 28.0, math.inf, 32768.0, math.inf,
                -math.inf]
    assert formats.hif8_quantize(x).tolist() == expected
    saturated = formats.hif8_quantize(torch.tensor([40960.0, -1e9, math.inf]), saturate=True)
    assert saturated.tolist() == [32768.0, -32768.0, 32768.0]
    assert formats.hif8_quantize(torch.tensor([1.0625]), rounding="even").tolist() == [1.0]
    x = torch.randn(5000, generator=torch.Generator().manual_seed(2)) * 100
    assert torch.equal(formats.hif8_decode(formats.hif8_encode(x)), formats.hif8_quantize(x))


def test_stochastic_rounding_is_unbiased_and_reproducible() -> None:
    x = torch.full((200000,), 1.1)  # between E4M3's 1.0 and 1.125, 80% of the way up
    got = E4M3.quantize(x, rounding="stochastic", generator=torch.Generator().manual_seed(3))
    assert set(got.unique().tolist()) == {1.0, 1.125}
    assert abs(got.mean().item() - 1.1) < 5e-4
    again = E4M3.quantize(x, rounding="stochastic", generator=torch.Generator().manual_seed(3))
    assert torch.equal(got, again)
    hybrid = formats.hif8_quantize(torch.full((100000,), 17.0), rounding="hybrid",
                                   generator=torch.Generator().manual_seed(4))  # e = 4: 2 bits, 16 and 20
    assert set(hybrid.unique().tolist()) == {16.0, 20.0} and abs(hybrid.mean().item() - 17.0) < 0.02
    assert formats.hif8_quantize(torch.full((10,), 1.0625), rounding="hybrid").unique().tolist() == [1.125]
