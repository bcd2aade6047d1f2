"""Low-precision number formats and their casts, in pure PyTorch: the one place that knows the grids.

Every cast here returns float32 values that lie on the target format's grid (a "fake" cast: the numbers
a hardware cast produces, kept in fp32), plus, where a storage layout is defined, the codes:

* **OCP FP8** ``E4M3`` (e4m3fn: bias 7, no infinities, max 448) and ``E5M2`` (bias 15, max 57344, with
  infinities), and **FP4** ``E2M1`` (bias 1, max 6): IEEE-style sign, exponent and mantissa with
  subnormals. Rounding to nearest, ties to even (``torch.round``); with ``saturate`` (the default, as the
  scaled casts of Transformer Engine and torchao clamp before casting) values beyond the largest finite
  number become that number, without it they become inf (E5M2) or NaN (E4M3, E2M1: no inf). The results
  equal ``torch``'s casts to ``float8_e4m3fn`` / ``float8_e5m2`` bit for bit (tests/unit/test_formats.py).
* **E8M0**, the MX block scale: a biased power of two, ``2 ** (code - 127)``, code 255 is NaN.
* **MX blocks** (OCP Microscaling spec v1.0): ``MXFP8`` (E4M3 or E5M2 elements) and ``MXFP4`` (E2M1), 32
  elements share one E8M0 scale ``2 ** (floor(log2(amax)) - emax_element)`` (the spec's scale rule, torchao's
  ``ScaleCalculationMode.FLOOR``), elements cast with saturation.
* **NVFP4**: E2M1 elements in blocks of 16, each block's scale ``amax / 6`` cast to E4M3, under one fp32
  per-tensor scale ``amax_tensor / (6 * 448)`` so the block scales use E4M3's range.
* **HiF8** (Huawei's HiFloat8, "Ascend HiFloat8 Format for Deep Learning", arXiv 2409.16626): tapered
  precision. After the sign, a prefix-coded *dot* field gives the exponent field's width ``D``:
  ``11`` D=4, ``10`` D=3, ``01`` D=2, ``001`` D=1, ``0001`` D=0, and ``0000`` the denormal mode. The exponent
  is stored in sign-magnitude with an implicit leading 1 of the magnitude (D=1: +-1, D=2: +-2..3, D=3:
  +-4..7, D=4: +-8..15; D=0: exponent 0), the rest of the 8 bits is mantissa: 3 bits for |e| <= 3, 2 for
  4..7, 1 for 8..15. The denormal mode stores 3 bits ``m``: ``2 ** (m - 23)`` (2^-22 .. 2^-16; m=0 is zero).
  Special codes as Ascend defines them: ``0x6F`` (the slot of 1.5 x 2^15) is +inf, ``0xEF`` -inf, ``0x80``
  (negative zero's slot) NaN; the largest finite value is 2^15. Casts round half away from zero as the
  Ascend cube does (``QF322HIF8_PRE``); values whose rounding reaches 1.25 x 2^15 = 40960 overflow to inf
  (or saturate to 2^15); the ``hybrid`` mode rounds |e| >= 4 stochastically (``VQF322HIF8_PRE_HYBRID``).

Stochastic rounding (``rounding="stochastic"``) rounds up with probability equal to the distance from the
lower neighbour, using the generator given, so a recipe that asks for it is reproducible.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

ROUNDINGS = ("even", "away", "stochastic")
MX_BLOCK = 32  # elements per E8M0 scale in the OCP MX formats
NVFP4_BLOCK = 16  # elements per E4M3 scale in NVFP4
E8M0_BIAS, E8M0_NAN = 127, 255
E4M3_TINY = 2.0 ** -6  # E4M3's smallest normal: the floor of an NVFP4 block scale


def _round(scaled: torch.Tensor, rounding: str, generator: Optional[torch.Generator]) -> torch.Tensor:
    """``scaled`` (non-negative, in units of the grid's spacing) rounded to an integer."""
    if rounding == "even":
        return torch.round(scaled)  # ties to even
    if rounding == "away":
        return torch.floor(scaled + 0.5)  # exact: scaled < 2 ** 5 here, far from fp32's 24-bit limit
    if rounding == "stochastic":
        noise = torch.rand(scaled.shape, generator=generator, device=scaled.device)
        return torch.floor(scaled + noise)
    raise ValueError(f"rounding {rounding!r} is not one of {ROUNDINGS}")


def _binade(magnitude: torch.Tensor) -> torch.Tensor:
    """``floor(log2(magnitude))`` exactly, as int32 (``magnitude`` > 0, finite)."""
    return torch.frexp(magnitude)[1] - 1  # magnitude = m * 2**e with m in [0.5, 1)


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-style small float: ``exponent_bits``, ``mantissa_bits``, ``bias``, its largest finite value
    and whether overflow gives inf (else NaN)."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_value: float
    has_inf: bool
    torch_dtype: Optional[torch.dtype] = None

    @property
    def min_normal_exponent(self) -> int:
        return 1 - self.bias

    @property
    def max_exponent(self) -> int:
        """The exponent of the largest finite value (MX's ``emax`` of the element type)."""
        return int(torch.frexp(torch.tensor(self.max_value))[1]) - 1

    def quantize(self, x: torch.Tensor, saturate: bool = True, rounding: str = "even",
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """``x`` cast to this format and back, in fp32: the nearest value of the grid (subnormals included)."""
        x = x.float()
        magnitude = x.abs()
        exponent = _binade(magnitude.clamp(min=torch.finfo(torch.float32).tiny)).clamp(min=self.min_normal_exponent)
        spacing = torch.ldexp(torch.ones_like(magnitude), exponent - self.mantissa_bits)  # the grid's step there
        rounded = _round(magnitude / spacing, rounding, generator) * spacing
        if saturate:
            rounded = rounded.clamp(max=self.max_value)
        else:
            rounded = torch.where(rounded > self.max_value,
                                  torch.full_like(rounded, float("inf") if self.has_inf else float("nan")), rounded)
        out = torch.copysign(rounded, x)
        return torch.where(torch.isnan(x), x, out)


E4M3 = FloatFormat("e4m3", 4, 3, 7, 448.0, has_inf=False, torch_dtype=torch.float8_e4m3fn)
E5M2 = FloatFormat("e5m2", 5, 2, 15, 57344.0, has_inf=True, torch_dtype=torch.float8_e5m2)
E2M1 = FloatFormat("e2m1", 2, 1, 1, 6.0, has_inf=False)
FORMATS = {fmt.name: fmt for fmt in (E4M3, E5M2, E2M1)}


# --------------------------------------------------------------------------- E8M0 (the MX scale)

def e8m0_encode(exponent: torch.Tensor) -> torch.Tensor:
    """The E8M0 code of ``2 ** exponent`` (int tensor in [-127, 127]) as uint8."""
    if exponent.numel() and (int(exponent.min()) < -E8M0_BIAS or int(exponent.max()) > E8M0_BIAS):
        raise ValueError(f"E8M0 holds exponents -127..127, got {int(exponent.min())}..{int(exponent.max())}")
    return (exponent.to(torch.int32) + E8M0_BIAS).to(torch.uint8)


def e8m0_decode(codes: torch.Tensor) -> torch.Tensor:
    """``2 ** (code - 127)`` in fp32; code 255 is NaN."""
    exponent = codes.to(torch.int32) - E8M0_BIAS
    values = torch.ldexp(torch.ones(codes.shape, dtype=torch.float32, device=codes.device), exponent)
    return torch.where(codes.to(torch.int32) == E8M0_NAN, torch.full_like(values, float("nan")), values)


# --------------------------------------------------------------------------- FP4 codes (E2M1)

def e2m1_values(device: Optional[torch.device] = None) -> torch.Tensor:
    """The 16 E2M1 values by code (sign in bit 3): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives."""
    positive = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device=device)
    return torch.cat([positive, -positive])


def e2m1_encode(values: torch.Tensor) -> torch.Tensor:
    """The 4-bit codes (uint8, one per element) of values already on the E2M1 grid."""
    table = e2m1_values(values.device)[:8]
    magnitude_code = torch.searchsorted(table, values.abs().float().contiguous())
    return (magnitude_code + 8 * torch.signbit(values).to(magnitude_code.dtype)).to(torch.uint8)


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """The fp32 values of 4-bit E2M1 codes (uint8, one per element)."""
    return e2m1_values(codes.device)[codes.long()]


# --------------------------------------------------------------------------- MX and NVFP4 blocks

def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """``[..., n]`` -> ``[..., n / block, block]``; a last dimension not divisible is a one-line error."""
    if x.size(-1) % block:
        raise ValueError(f"the last dimension ({x.size(-1)}) must be divisible by the block of {block} elements")
    return x.reshape(*x.shape[:-1], x.size(-1) // block, block)


def mx_quantize(x: torch.Tensor, element: FloatFormat, block: int = MX_BLOCK,
                rounding: str = "even", generator: Optional[torch.Generator] = None
                ) -> Tuple[torch.Tensor, torch.Tensor]:
    """OCP MX cast of ``x`` ``[..., n]`` along its last dimension: the elements ``[..., n]`` (fp32 values on
    ``element``'s grid, before scaling) and the E8M0 scale codes ``[..., n / block]`` (uint8)."""
    blocks = _blocks(x.float(), block)  # [..., n/block, block]
    amax = blocks.abs().amax(dim=-1)  # [..., n/block]
    shared = _binade(amax.clamp(min=torch.finfo(torch.float32).tiny)) - element.max_exponent
    shared = torch.where(amax == 0, torch.full_like(shared, -E8M0_BIAS), shared).clamp(-E8M0_BIAS, E8M0_BIAS)
    scale = torch.ldexp(torch.ones_like(amax), shared)[..., None]  # [..., n/block, 1]
    elements = element.quantize(blocks / scale, saturate=True, rounding=rounding, generator=generator)
    return elements.reshape(x.shape), e8m0_encode(shared)


def mx_dequantize(elements: torch.Tensor, scales: torch.Tensor, block: int = MX_BLOCK) -> torch.Tensor:
    """``elements`` ``[..., n]`` times their blocks' E8M0 ``scales`` ``[..., n / block]``, in fp32."""
    return (_blocks(elements.float(), block) * e8m0_decode(scales)[..., None]).reshape(elements.shape)


def nvfp4_quantize(x: torch.Tensor, rounding: str = "even", generator: Optional[torch.Generator] = None
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NVFP4 cast along the last dimension: E2M1 elements ``[..., n]``, E4M3 block scales ``[..., n / 16]``
    (fp32 values on the E4M3 grid, at least its smallest normal) and the fp32 per-tensor scale
    ``amax / (6 * 448)``. The elements are ``x * ((1 / tensor scale) / block scale)`` cast with saturation,
    the product NVIDIA's and torchao's kernels form (a quotient would round differently)."""
    blocks = _blocks(x.float(), NVFP4_BLOCK)  # [..., n/16, 16]
    tensor_scale = nvfp4_tensor_scale(blocks.abs().amax())
    elements, block_scale = nvfp4_cast_blocks(blocks, tensor_scale, rounding, generator)
    return elements.reshape(x.shape), block_scale, tensor_scale


def nvfp4_tensor_scale(amax: torch.Tensor) -> torch.Tensor:
    """NVFP4's fp32 per-tensor scale from the tensor's amax: ``amax / (6 * 448)`` (1 for an all-zero tensor)."""
    tensor_scale = amax / (E2M1.max_value * E4M3.max_value)
    return torch.where(tensor_scale > 0, tensor_scale, torch.ones_like(tensor_scale))


def nvfp4_cast_blocks(blocks: torch.Tensor, tensor_scale: torch.Tensor, rounding: str = "even",
                      generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """NVFP4's cast of ``blocks`` ``[..., blocks, block]`` (16 elements in the format; any block a recipe forms,
    such as 16 x 16 weight tiles flattened): the E2M1 elements ``[..., blocks, block]`` and each block's E4M3
    scale ``[..., blocks]`` under ``tensor_scale``."""
    wanted = blocks.abs().amax(dim=-1) / E2M1.max_value / tensor_scale  # [..., blocks]
    block_scale = E4M3.quantize(wanted.clamp(min=E4M3_TINY, max=E4M3.max_value))
    elements = E2M1.quantize(blocks * ((1.0 / tensor_scale) / block_scale)[..., None], rounding=rounding,
                             generator=generator)
    return elements, block_scale


def nvfp4_dequantize(elements: torch.Tensor, block_scale: torch.Tensor, tensor_scale: torch.Tensor) -> torch.Tensor:
    """The fp32 values of an NVFP4 tensor."""
    blocks = _blocks(elements.float(), NVFP4_BLOCK) * (block_scale * tensor_scale)[..., None]
    return blocks.reshape(elements.shape)


# --------------------------------------------------------------------------- HiF8

HIF8_MAX = 2.0 ** 15
HIF8_OVERFLOW = 1.25 * 2.0 ** 15  # a rounded magnitude at or above it is inf (the slot of 1.5 x 2^15)
HIF8_MIN_EXPONENT = -22  # the denormal mode's smallest power of two
HIF8_POS_INF, HIF8_NEG_INF, HIF8_NAN = 0x6F, 0xEF, 0x80
HIF8_ROUNDINGS = ("away", "hybrid", "even", "stochastic")


def hif8_mantissa_bits(exponent: torch.Tensor) -> torch.Tensor:
    """Mantissa bits of HiF8 at ``exponent``: 3 for |e| <= 3, 2 for 4..7, 1 for 8..15, 0 in the denormal
    range (e <= -16)."""
    size = exponent.abs()
    bits = torch.where(size <= 3, 3, torch.where(size <= 7, 2, 1))
    return torch.where(exponent <= -16, 0, bits)


def hif8_quantize(x: torch.Tensor, saturate: bool = False, rounding: str = "away",
                  generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``x`` cast to HiF8 and back, in fp32. ``rounding``: ``away`` (the hardware's half away from zero),
    ``hybrid`` (away for |e| < 4, stochastic for |e| >= 4), ``even`` or ``stochastic``. Overflow (a rounded
    magnitude >= 1.25 x 2^15) is inf, or 2^15 with ``saturate``; inf saturates to 2^15 too, NaN stays NaN."""
    if rounding not in HIF8_ROUNDINGS:
        raise ValueError(f"HiF8 rounding {rounding!r} is not one of {HIF8_ROUNDINGS}")
    x = x.float()
    magnitude = x.abs()
    exponent = _binade(magnitude.clamp(min=torch.finfo(torch.float32).tiny, max=2.0 ** 16)).clamp(
        min=HIF8_MIN_EXPONENT)
    spacing = torch.ldexp(torch.ones_like(magnitude), exponent - hif8_mantissa_bits(exponent))
    scaled = magnitude / spacing
    if rounding == "hybrid":
        rounded = torch.where(exponent.abs() >= 4, _round(scaled, "stochastic", generator),
                              _round(scaled, "away", None))
    else:
        rounded = _round(scaled, rounding, generator)
    rounded = rounded * spacing
    over = rounded >= HIF8_OVERFLOW
    rounded = torch.where(over, torch.full_like(rounded, HIF8_MAX if saturate else float("inf")), rounded)
    out = torch.copysign(rounded, x)
    return torch.where(torch.isnan(x), x, out)


@functools.lru_cache(maxsize=1)
def _hif8_table() -> Tuple[float, ...]:
    """The value of each of the 256 HiF8 codes, decoded field by field."""
    values = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        bits = code & 0x7F  # 7 bits after the sign
        if bits >> 5 == 0b11:
            width, rest = 4, 5
        elif bits >> 5 == 0b10:
            width, rest = 3, 5
        elif bits >> 5 == 0b01:
            width, rest = 2, 5
        elif bits >> 4 == 0b001:
            width, rest = 1, 4
        elif bits >> 3 == 0b0001:
            width, rest = 0, 3
        else:  # 0000: denormal mode, 3 bits m -> 2^(m - 23), m = 0 is zero
            m = bits & 0b111
            values.append(sign * 2.0 ** (m - 23) if m else 0.0 * sign)
            continue
        field = bits & ((1 << rest) - 1)  # exponent (width bits) then mantissa
        mantissa_bits = rest - width
        mantissa = field & ((1 << mantissa_bits) - 1)
        exponent_field = field >> mantissa_bits
        if width == 0:
            exponent = 0
        else:  # sign-magnitude, the magnitude's leading 1 implicit
            magnitude = (1 << (width - 1)) | (exponent_field & ((1 << (width - 1)) - 1))
            exponent = -magnitude if exponent_field >> (width - 1) else magnitude
        values.append(sign * (1.0 + mantissa / (1 << mantissa_bits)) * 2.0 ** exponent)
    values[HIF8_POS_INF], values[HIF8_NEG_INF], values[HIF8_NAN] = float("inf"), float("-inf"), float("nan")
    return tuple(values)


def hif8_decode(codes: torch.Tensor) -> torch.Tensor:
    """The fp32 values of HiF8 codes (uint8)."""
    return torch.tensor(_hif8_table(), dtype=torch.float32, device=codes.device)[codes.long()]


def hif8_encode(x: torch.Tensor, saturate: bool = False, rounding: str = "away",
                generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The HiF8 codes (uint8) of ``x`` cast as :func:`hif8_quantize` casts it."""
    values = hif8_quantize(x, saturate, rounding, generator)
    table = torch.tensor(_hif8_table(), dtype=torch.float32, device=x.device)
    positive_codes = torch.tensor([c for c in range(0x80) if c != HIF8_POS_INF], device=x.device)
    order = torch.argsort(table[positive_codes])
    sorted_values, sorted_codes = table[positive_codes][order], positive_codes[order]
    index = torch.searchsorted(sorted_values, values.abs().clamp(max=HIF8_MAX).contiguous())
    codes = sorted_codes[index.clamp(max=sorted_codes.numel() - 1)]
    codes = torch.where(torch.isinf(values), torch.full_like(codes, HIF8_POS_INF), codes)
    codes = codes | (torch.signbit(values) & (values != 0)).to(codes.dtype) << 7
    return torch.where(torch.isnan(values), torch.full_like(codes, HIF8_NAN), codes).to(torch.uint8)
