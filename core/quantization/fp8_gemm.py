"""The GEMM of an FP8 linear: one dispatch, chosen once per run and recipe (``--fp8-gemm``).

Each GEMM of :class:`~core.quantization.fp8.Fp8Linear` multiplies two :class:`Quantised` operands ``a @ b``
(``a`` ``[M, K]``, ``b`` ``[K, N]``, each quantised along K): the values on the format's grid, already multiplied
by their scale, and that scale (per tensor, or per row of ``a`` and per column of ``b``). The backends:

* ``scaled_mm``: ``torch._scaled_mm`` on the FP8 bytes (the grid values cast to ``float8_e4m3fn`` /
  ``float8_e5m2``, exact), with the dequantisation scales ``1 / scale``, the first operand row-major and the
  second column-major, an fp32 product. It serves the per-tensor recipes (``tensorwise``, ``delayed``) and
  ``rowwise`` (scales ``[M, 1]`` and ``[1, N]``) in ``e4m3`` and ``hybrid``, whose GEMMs pair E4M3 x E4M3
  (forward) and E5M2 gradients x E4M3 (backward); torch refuses E5M2 x E5M2 on CUDA, which no recipe pairs.
  Where torch's row-wise kernel writes bf16 only (CUDA), a row-wise GEMM runs with unit scales in fp32 and the
  scales multiply its product (the same numbers; rowwise's scales are powers of two). CUDA's kernels want K and
  N in multiples of 16: operands are zero-padded to them (exact) and the product cut back.
* ``emulated`` (the reference): the dequantised operands ``values / scale`` multiplied in fp32, the numbers an
  FP8 GEMM with fp32 accumulation produces up to the order of its sums.

``blockwise`` and ``mxfp8`` stay emulated: this torch's ``_scaled_mm`` takes per-tensor and per-row scales
only (on the CPU; its CUDA block scales are not wired here). HiF8 has no torch dtype: always emulated.

``auto`` picks ``scaled_mm`` where the device has FP8 matrix units (a CUDA device of compute capability 8.9+,
:func:`core.device.fp8_matmul`) and the recipe is served, else the emulation: on the CPU too, whose
``_scaled_mm`` runs but is slower than the fp32 product (a 1024^3 GEMM on 2 cores: 16 ms against 12 ms); a
forced ``scaled_mm`` runs on the CPU (the tests compare it with the emulation there). Not wired: Transformer
Engine's GEMM and the Ascend library's quantised matmul (no machine here to check them on).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from core.device import Fp8Matmul, fp8_matmul, rowwise_scaled_mm_in_fp32
from core.quantization.formats import E4M3, E5M2, FloatFormat

AUTO, SCALED_MM, EMULATED = "auto", "scaled_mm", "emulated"
GEMM_CHOICES = (AUTO, SCALED_MM, EMULATED)  # --fp8-gemm
GEMM_BACKENDS = (SCALED_MM, EMULATED)  # what auto resolves to
SCALED_MM_RECIPES = ("tensorwise", "delayed", "rowwise")  # scales per tensor or per row
SCALED_MM_PAIRS = ((E4M3, E4M3), (E4M3, E5M2), (E5M2, E4M3))  # (a, b) element formats torch multiplies
SCALED_MM_ALIGN = 16  # CUDA's _scaled_mm wants K and N in multiples of 16
Pair = Tuple[Optional[FloatFormat], Optional[FloatFormat]]


@dataclass(frozen=True)
class Quantised:
    """A GEMM operand ``[rows, cols]``: ``values`` (fp32) on the grid of ``fmt`` (None: HiF8), already multiplied
    by ``scale`` (``[]`` per tensor, ``[rows, 1]`` or ``[1, cols]`` per row along the reduction; None: the values
    are dequantised already, as the block recipes make them)."""

    values: torch.Tensor
    scale: Optional[torch.Tensor]
    fmt: Optional[FloatFormat]

    def dequantised(self) -> torch.Tensor:
        """The fp32 numbers the operand stands for: ``values / scale``."""
        return self.values if self.scale is None else self.values / self.scale

    def t(self) -> "Quantised":
        """The transposed operand (a per-row scale becomes a per-column one)."""
        scale = self.scale.t() if self.scale is not None and self.scale.dim() == 2 else self.scale
        return Quantised(self.values.t(), scale, self.fmt)


def emulated_product(a: Quantised, b: Quantised) -> torch.Tensor:
    """``a @ b`` on the dequantised operands in fp32: ``[M, K] @ [K, N] -> [M, N]``."""
    return a.dequantised() @ b.dequantised()


def _round_up(size: int) -> int:
    return -(-size // SCALED_MM_ALIGN) * SCALED_MM_ALIGN


def _fp8_rows(values: torch.Tensor, fmt: FloatFormat, rows: int, cols: int) -> torch.Tensor:
    """``values`` ``[r, c]`` (on ``fmt``'s grid) zero-padded to ``[rows, cols]``, as ``fmt``'s dtype, row-major."""
    pad = (0, cols - values.size(1), 0, rows - values.size(0))
    padded = F.pad(values, pad) if any(pad) else values
    return padded.to(fmt.torch_dtype).contiguous()


def _dequantisation_scale(scale: torch.Tensor, columns: Optional[int] = None) -> torch.Tensor:
    """``1 / scale`` in fp32, contiguous: a scalar, ``[M, 1]``, or ``[1, N]`` padded to ``[1, columns]`` (the
    padded columns of the product are cut)."""
    inverse = scale.float().reciprocal()
    if inverse.dim() == 2 and columns is not None and inverse.size(1) != columns:
        inverse = F.pad(inverse, (0, columns - inverse.size(1)), value=1.0)
    return inverse.contiguous()


def scaled_mm_product(a: Quantised, b: Quantised) -> torch.Tensor:
    """``a @ b`` through ``torch._scaled_mm`` on the FP8 bytes, fp32: ``[M, K] @ [K, N] -> [M, N]``."""
    if a.scale is None or b.scale is None or a.fmt is None or b.fmt is None:
        raise ValueError("torch._scaled_mm takes operands with per-tensor or per-row scales in E4M3/E5M2")
    (m, k), n = a.values.shape, b.values.size(1)
    k_padded, n_padded = _round_up(k), _round_up(n)
    a8 = _fp8_rows(a.values, a.fmt, m, k_padded)  # [M, K'] row-major
    b8 = _fp8_rows(b.values.t(), b.fmt, n_padded, k_padded).t()  # [K', N'] column-major
    scale_a = _dequantisation_scale(a.scale)  # [] or [M, 1]
    scale_b = _dequantisation_scale(b.scale, n_padded)  # [] or [1, N']
    per_row = scale_a.dim() == 2
    if per_row and not rowwise_scaled_mm_in_fp32(a.values.device.type):  # the scales after an fp32 product
        one = torch.ones((), device=a8.device)
        product = torch._scaled_mm(a8, b8, one, one, out_dtype=torch.float32) * scale_a * scale_b
    else:
        product = torch._scaled_mm(a8, b8, scale_a, scale_b, out_dtype=torch.float32)  # [M, N']
    return product[:, :n] if n_padded != n else product


PRODUCTS: Dict[str, Callable[[Quantised, Quantised], torch.Tensor]] = {
    SCALED_MM: scaled_mm_product, EMULATED: emulated_product}


def scaled_mm_refusal(recipe: str, pairs: Sequence[Pair]) -> Optional[str]:
    """Why ``torch._scaled_mm`` cannot serve ``recipe`` whose GEMMs pair ``pairs`` of element formats (None:
    it can), in words."""
    if any(fmt is None for pair in pairs for fmt in pair):
        return "HiF8 has no torch dtype"
    if recipe not in SCALED_MM_RECIPES:
        return f"the {recipe} recipe's block scales are not fed to torch._scaled_mm (per-tensor and per-row only)"
    refused = [pair for pair in pairs if pair not in SCALED_MM_PAIRS]
    if refused:
        return f"torch._scaled_mm does not multiply {refused[0][0].name} by {refused[0][1].name}"
    return None


@dataclass(frozen=True)
class GemmChoice:
    """The run's FP8 GEMM backend (``scaled_mm`` | ``emulated``) and why, for the log."""

    name: str
    why: str

    def notice(self) -> str:
        """What the run logs: the backend and, for the emulation, that it is one and why."""
        if self.name == SCALED_MM:
            return f"the GEMMs run through torch._scaled_mm: {self.why}"
        return f"the GEMMs are emulated (quantise, dequantise, fp32 product): {self.why}"


def scaled_mm_refused(why: str) -> str:
    """The one-line refusal of a forced ``--fp8-gemm scaled_mm`` that cannot run, ``why`` in words."""
    return f"--fp8-gemm scaled_mm: {why}; use --fp8-gemm auto or emulated"


def choose_backend(request: str, refusal: Optional[str], device_type: Optional[str] = None,
                   facts: Optional[Fp8Matmul] = None) -> GemmChoice:
    """The backend for ``request`` (``--fp8-gemm``) given why ``scaled_mm`` cannot serve the recipe
    (``refusal``, None: it can) and the device's FP8 GEMM ``facts`` (default: ``device_type``'s). A forced
    backend that cannot serve is refused: ValueError, one line naming the flag and the fix."""
    if request not in GEMM_CHOICES:
        raise ValueError(f"--fp8-gemm {request!r} is not one of {GEMM_CHOICES}")
    if request == EMULATED:
        return GemmChoice(EMULATED, "--fp8-gemm emulated")
    if refusal is not None:
        if request == SCALED_MM:
            raise ValueError(scaled_mm_refused(refusal))
        return GemmChoice(EMULATED, refusal)
    facts = facts or fp8_matmul(device_type)
    if request == SCALED_MM:
        if not facts.runs:
            raise ValueError(scaled_mm_refused(f"torch._scaled_mm does not run on {facts.device} "
                                               f"({facts.why_not_fast})"))
        return GemmChoice(SCALED_MM, f"--fp8-gemm scaled_mm {_on(facts)}")
    return GemmChoice(SCALED_MM if facts.fast else EMULATED, _on(facts))


def _on(facts: Fp8Matmul) -> str:
    """The device and what it offers FP8 GEMMs, in words."""
    return f"on {facts.device}, " + ("FP8 matrix units" if facts.fast else facts.why_not_fast)
