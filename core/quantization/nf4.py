"""NF4 storage of a weight (QLoRA): 4-bit NormalFloat codes, blockwise absmax, double quantisation.

The format is the one the QLoRA paper (Dettmers et al., 2023) describes and bitsandbytes stores
(``quantize_4bit(..., quant_type="nf4", compress_statistics=True)``), so a state made here and one
made by bitsandbytes hold the same bytes:

- The flattened weight (row-major, ``n`` elements) is cut into blocks of ``blocksize`` (64); the last
  block may be partial. Each block is scaled by ``1 / absmax`` of its elements into ``[-1, 1]`` and
  every element is replaced by the index of the nearest of the 16 NF4 values (:func:`nf4_code`).
- Two indices share a byte, the first element in the high nibble: ``packed[i] = q[2i] << 4 | q[2i+1]``
  (``ceil(n / 2)`` bytes; an odd ``n`` pads the last low nibble with the code of 0.0).
- Double quantisation stores the fp32 absmax constants themselves in 8 bits: their mean (``offset``)
  is subtracted, then they are quantised blockwise (256 per block) with the signed 8-bit dynamic
  tree code (:func:`dynamic_code`), keeping one fp32 absmax per 256 constants. A constant comes back
  as ``dynamic_code[q] * absmax2 + offset``.

Bytes per weight: 0.5 for the codes, plus 1/64 for the 8-bit constants and 4/(64*256) for their
scales: about 0.516 (0.5625 without double quantisation).

The pure-PyTorch reference (:func:`quantize_nf4_reference`, :func:`dequantize_nf4_reference`) runs on
every device. On an NVIDIA GPU with bitsandbytes installed its kernels do the same work
(:func:`nf4_kernel` says which one a device type uses); ``tests/unit/test_nf4.py`` compares the two
where bitsandbytes exists.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch

from core.device import kernels_by_device

NF4_BLOCKSIZE = 64  # weights per absmax constant
ABSMAX_BLOCKSIZE = 256  # absmax constants per fp32 scale under double quantisation
# The NF4 quantiles span [1 - offset, offset] of N(0, 1): the QLoRA paper's offset, the mean of
# 1 - 1/(2*15) and 1 - 1/(2*16) (the outermost of 15 and of 16 equal-probability bins).
NF4_QUANTILE_OFFSET = 0.9677083


class QuantizationError(ValueError):
    """A weight or module that cannot be quantised (one line naming it and the fix)."""


@functools.lru_cache(maxsize=None)
def nf4_code() -> torch.Tensor:
    """The 16 NF4 values, ascending in ``[-1, 1]`` with an exact 0 (fp32, CPU).

    Normal quantiles: 8 positive ones at probabilities ``linspace(offset, 0.5, 9)[:-1]``, 7 negative
    ones mirrored from ``linspace(offset, 0.5, 8)[:-1]``, and 0; divided by the largest. The
    probabilities are fp32 (as the reference construction), the quantiles evaluated in fp64.
    """
    positive = torch.special.ndtri(torch.linspace(NF4_QUANTILE_OFFSET, 0.5, 9)[:-1].double()).float()
    negative = -torch.special.ndtri(torch.linspace(NF4_QUANTILE_OFFSET, 0.5, 8)[:-1].double()).float()
    values = torch.cat([positive, torch.zeros(1), negative]).sort().values  # [16]
    return values / values.max()


@functools.lru_cache(maxsize=None)
def dynamic_code() -> torch.Tensor:
    """The signed 8-bit dynamic tree code (Dettmers, 2015): 256 ascending fp32 values in ``[-1, 1]``.

    Besides the sign, a byte holds a decimal exponent ``e`` in 0..6 and a linear fraction with
    ``2**e`` steps: magnitudes ``10**(e - 6) * m`` for the midpoints ``m`` of ``2**e`` equal bins of
    ``[0.1, 1]``, with both signs; plus 0 and 1.
    """
    values = []
    for exponent in range(7):
        bins = torch.linspace(0.1, 1.0, 2**exponent + 1)  # fp32, as the reference construction
        midpoints = (bins[:-1] + bins[1:]) / 2.0
        values += (10 ** (exponent - 6) * midpoints).tolist()
        values += (-(10 ** (exponent - 6)) * midpoints).tolist()
    values += [0.0, 1.0]
    return torch.tensor(sorted(values), dtype=torch.float32)  # [256]


@functools.lru_cache(maxsize=None)
def _midpoints(code_name: str, device: torch.device) -> torch.Tensor:
    """Decision boundaries between consecutive code values (a value on a boundary takes the lower one)."""
    code = (nf4_code() if code_name == "nf4" else dynamic_code()).to(device)
    return (code[:-1] + code[1:]) / 2.0


@functools.lru_cache(maxsize=None)
def _nf4_pairs(device: torch.device) -> torch.Tensor:
    """Per byte value, the NF4 values of its high and its low nibble: ``[256, 2]`` fp32."""
    byte = torch.arange(256, device=device)
    code = nf4_code().to(device)
    return torch.stack([code[byte >> 4], code[byte & 0xF]], dim=1)


def _nearest_index(scaled: torch.Tensor, code_name: str) -> torch.Tensor:
    """Index of the nearest code value for each element of ``scaled`` (in ``[-1, 1]``), as uint8."""
    return torch.bucketize(scaled, _midpoints(code_name, scaled.device)).to(torch.uint8)


def _num_blocks(n: int, blocksize: int) -> int:
    return -(-n // blocksize)


def _blocks(flat: torch.Tensor, blocksize: int) -> torch.Tensor:
    """``flat`` [n] zero-padded to whole blocks: ``[num_blocks, blocksize]`` (zeros leave every absmax as is)."""
    padding = _num_blocks(flat.numel(), blocksize) * blocksize - flat.numel()
    return (torch.nn.functional.pad(flat, (0, padding)) if padding else flat).view(-1, blocksize)


def _quantize_blockwise(flat: torch.Tensor, blocksize: int, code_name: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Indices ``[num_blocks * blocksize]`` (uint8, padding included) and fp32 absmax ``[num_blocks]``."""
    blocks = _blocks(flat.float(), blocksize)  # [nb, bs]
    absmax = blocks.abs().amax(dim=1)  # [nb]
    inverse = torch.where(absmax > 0, 1.0 / absmax, torch.zeros_like(absmax))  # an all-zero block stays 0
    scaled = (blocks * inverse.unsqueeze(1)).clamp(-1.0, 1.0)  # [nb, bs]
    return _nearest_index(scaled.view(-1), code_name), absmax


def _dequantize_blockwise(indices: torch.Tensor, absmax: torch.Tensor, blocksize: int, n: int) -> torch.Tensor:
    """fp32 ``[n]`` from dynamic-code indices ``[n]`` and their blocks' absmax."""
    values = dynamic_code().to(indices.device).index_select(0, indices.long())  # [n]
    return _blocks(values, blocksize).mul_(absmax.unsqueeze(1)).view(-1)[:n]


@dataclass
class NF4State:
    """One weight in NF4 (see the module docstring for the layout).

    ``packed``: uint8 ``[ceil(n / 2)]``. ``absmax``: fp32 ``[ceil(n / blocksize)]``, or, with double
    quantisation, their uint8 dynamic-code indices, with ``absmax_scale`` fp32
    ``[ceil(blocks / 256)]`` and ``absmax_offset`` an fp32 scalar tensor. ``shape``: the weight's.
    """

    packed: torch.Tensor
    absmax: torch.Tensor
    shape: Tuple[int, ...]
    blocksize: int = NF4_BLOCKSIZE
    absmax_scale: Optional[torch.Tensor] = None
    absmax_offset: Optional[torch.Tensor] = None

    @property
    def double_quant(self) -> bool:
        return self.absmax_scale is not None

    @property
    def numel(self) -> int:
        return int(torch.Size(self.shape).numel())

    @property
    def device(self) -> torch.device:
        return self.packed.device

    def tensors(self) -> Tuple[torch.Tensor, ...]:
        """Every tensor the state holds (what it costs in memory)."""
        extra = (self.absmax_scale, self.absmax_offset) if self.double_quant else ()
        return (self.packed, self.absmax, *extra)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors())

    def block_absmax(self) -> torch.Tensor:
        """The fp32 absmax of every block ``[num_blocks]`` (double quantisation undone)."""
        if not self.double_quant:
            return self.absmax
        return _dequantize_blockwise(self.absmax, self.absmax_scale, ABSMAX_BLOCKSIZE,
                                     self.absmax.numel()) + self.absmax_offset

    def clone(self) -> "NF4State":
        extra = {}
        if self.double_quant:
            extra = dict(absmax_scale=self.absmax_scale.clone(), absmax_offset=self.absmax_offset.clone())
        return NF4State(self.packed.clone(), self.absmax.clone(), self.shape, self.blocksize, **extra)


def quantize_nf4_reference(weight: torch.Tensor, blocksize: int = NF4_BLOCKSIZE,
                           double_quant: bool = True) -> NF4State:
    """NF4 state of ``weight`` (any shape, fp32/bf16/fp16), in pure PyTorch."""
    flat = weight.detach().reshape(-1)  # [n]
    n = flat.numel()
    codes, absmax = _quantize_blockwise(flat, blocksize, "nf4")  # [nb * bs] uint8, [nb] fp32
    codes = codes[:n + n % 2]  # an odd n keeps one padding code (0.0) for the last low nibble
    packed = (codes[0::2] << 4) | codes[1::2]  # [ceil(n / 2)]
    state = NF4State(packed, absmax, tuple(weight.shape), blocksize)
    if double_quant:
        offset = absmax.mean()
        indices, scale = _quantize_blockwise(absmax - offset, ABSMAX_BLOCKSIZE, "dynamic")
        state.absmax, state.absmax_scale, state.absmax_offset = indices[:absmax.numel()], scale, offset
    return state


def dequantize_nf4_reference(state: NF4State, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The weight ``state`` holds, in ``dtype`` (computed in fp32), in pure PyTorch."""
    values = _nf4_pairs(state.device).index_select(0, state.packed.long()).view(-1)  # [2 * ceil(n / 2)] fp32
    weights = _blocks(values, state.blocksize).mul_(state.block_absmax().unsqueeze(1))  # [nb, bs]
    return weights.view(-1)[:state.numel].view(state.shape).to(dtype)


# ---------------------------------------------------------------------------------------------------
# bitsandbytes as the kernel (NVIDIA GPUs, when installed): the same bytes, computed by its CUDA code.

def _bitsandbytes() -> Optional[object]:
    try:
        import bitsandbytes.functional as bnb_functional
    except ImportError:  # optional: the reference does the same work
        return None
    return bnb_functional


def _bnb_quantize(weight: torch.Tensor, blocksize: int = NF4_BLOCKSIZE, double_quant: bool = True) -> NF4State:
    packed, quant_state = _bitsandbytes().quantize_4bit(weight.detach().contiguous(), blocksize=blocksize,
                                                        compress_statistics=double_quant, quant_type="nf4")
    state = NF4State(packed.view(torch.uint8).view(-1), quant_state.absmax, tuple(weight.shape), blocksize)
    if double_quant:
        state.absmax_scale = quant_state.state2.absmax
        state.absmax_offset = torch.as_tensor(quant_state.offset, dtype=torch.float32, device=weight.device)
    return state


def to_bnb_quant_state(state: NF4State, dtype: torch.dtype) -> object:
    """bitsandbytes' ``QuantState`` for ``state`` (dequantising to ``dtype``)."""
    bnb = _bitsandbytes()
    nested = None
    if state.double_quant:
        nested = bnb.QuantState(absmax=state.absmax_scale, code=dynamic_code().to(state.device),
                                blocksize=ABSMAX_BLOCKSIZE, dtype=torch.float32)
    return bnb.QuantState(absmax=state.absmax, shape=torch.Size(state.shape), code=nf4_code().to(state.device),
                          blocksize=state.blocksize, quant_type="nf4", dtype=dtype,
                          offset=state.absmax_offset, state2=nested)


def _bnb_dequantize(state: NF4State, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return _bitsandbytes().dequantize_4bit(state.packed.view(-1, 1), to_bnb_quant_state(state, dtype))


Quantize = Callable[..., NF4State]
Dequantize = Callable[[NF4State, torch.dtype], torch.Tensor]
_REFERENCE = ("reference", quantize_nf4_reference, dequantize_nf4_reference)
# device type -> (kernel name, quantize, dequantize, test that the kernel's package imports)
FUSED_KERNELS = kernels_by_device(
    bitsandbytes=("bitsandbytes", _bnb_quantize, _bnb_dequantize, lambda: _bitsandbytes() is not None))


@functools.lru_cache(maxsize=None)
def nf4_kernel(device_type: str) -> Tuple[str, Quantize, Dequantize]:
    """The NF4 kernels for tensors on ``device_type``: ("bitsandbytes" | "reference", quantize, dequantize).

    Looked up once per device type (``nf4_kernel.cache_clear()`` forgets the choice).
    """
    entry = FUSED_KERNELS.get(device_type)
    if entry is None or not entry[3]():
        return _REFERENCE
    return entry[:3]


def quantize_nf4(weight: torch.Tensor, blocksize: int = NF4_BLOCKSIZE, double_quant: bool = True) -> NF4State:
    """NF4 state of ``weight`` through the kernel of its device (see :func:`quantize_nf4_reference`)."""
    if not weight.is_floating_point():
        raise QuantizationError(f"NF4 quantises floating-point weights, got {weight.dtype}")
    return nf4_kernel(weight.device.type)[1](weight, blocksize, double_quant)


def dequantize_nf4(state: NF4State, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The weight ``state`` holds, in ``dtype``, through the kernel of its device."""
    return nf4_kernel(state.device.type)[2](state, dtype)
