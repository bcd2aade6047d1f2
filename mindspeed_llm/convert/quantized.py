"""Quantised Hugging Face checkpoints read as the weights they stand for (``quantization_config`` in config.json).

Two published layouts are dequantised on import, tensor by tensor, as transformers dequantises them
(``Fp8Dequantize``, ``convert_moe_packed_tensors``), into fp32 (exact: no rounding beyond the fp32 product):

* ``quant_method: fp8`` (DeepSeek-V3/V3.2/V4, GLM-5; ``fmt: e4m3``): a linear's ``X.weight`` holds E4M3 values
  and ``X.weight_scale_inv`` (fp32 ``[ceil(out / bn), ceil(in / bk)]``, ``weight_block_size`` ``[bn, bk]``,
  128 x 128) one multiplier per block: ``weight = fp8 * scale_inv`` over each block (a last partial block takes
  its row's or column's scale, as DeepSeek's own ``weight_dequant`` does). A weight stored as packed FP4 (int8,
  two E2M1 codes per byte, low nibble first) with E8M0 scales on a finer grid (DeepSeek-V4's experts, ``[1, 32]``
  blocks) is read the same way, its block taken from the grid as transformers' ``Fp8Dequantize`` takes it.
  Tensors without a scale are read as they are (embeddings, norms, the router).
* ``quant_method: mxfp4`` (gpt-oss): an expert stack ``P`` is stored as ``P_blocks`` (uint8 ``[E, rows, G, 16]``,
  two E2M1 codes per byte, the low nibble first) and ``P_scales`` (uint8 E8M0 ``[E, rows, G]``, one per 32
  elements); the weight transformers builds is ``[E, G * 32, rows]`` (its ``gate_up_proj`` / ``down_proj``).

Any other method (or FP8 other than E4M3 blocks) is refused in one line by the registry's ``refuse_quantized``.

``--save-hf-fp8`` writes the same block FP8 (:func:`quantize_fp8_blocks`, :func:`fp8_exported` picks the linear
weights), so the export loads where DeepSeek's checkpoints load, and reads back as ``fp8 * scale_inv`` exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from core.quantization.formats import e2m1_decode, e8m0_decode
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.models.registry import fp8_block

FP8_SCALE_SUFFIX = "_scale_inv"  # X.weight -> X.weight_scale_inv
FP8_EXPORT_BLOCK = (128, 128)  # DeepSeek's weight_block_size
FP8_EXPORT_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                     "weight_block_size": list(FP8_EXPORT_BLOCK)}
KEPT_IN_HIGH_PRECISION = ("embed", "norm", "lm_head")  # name parts of weights an FP8 export leaves as they are
ROUTER_MODULES = ("gate", "router")  # a MoE router's module (mlp.gate, block_sparse_moe.gate): high precision
MXFP4_BLOCKS, MXFP4_SCALES = "_blocks", "_scales"  # P -> P_blocks, P_scales
PACKED_FP4_DTYPES = ("I8", "U8")  # safetensors dtypes of weights stored as packed FP4 beside FP8 ones


@dataclass(frozen=True)
class Dequantized:
    """A weight the checkpoint stores quantised: how (``fp8`` | ``mxfp4``), the stored tensors it is read from
    (values first, then scales) and its shape once dequantised."""

    kind: str
    sources: Tuple[str, ...]
    shape: Tuple[int, ...]


def plan_dequantization(method: Optional[str], shapes: Dict[str, Tuple[int, ...]], dtypes: Dict[str, str]
                        ) -> Dict[str, Dequantized]:
    """The weights to dequantise, by the name the weight map knows, from the checkpoint's tensor names, shapes
    and safetensors dtypes."""
    plan: Dict[str, Dequantized] = {}
    if method == "fp8":
        for name in shapes:
            scale = name + FP8_SCALE_SUFFIX
            if scale in shapes and dtypes[name].startswith("F8_"):
                plan[name] = Dequantized("fp8", (name, scale), shapes[name])
            elif scale in shapes and dtypes[name] in PACKED_FP4_DTYPES:  # two E2M1 codes per byte
                plan[name] = Dequantized("fp8", (name, scale), shapes[name][:-1] + (2 * shapes[name][-1],))
    elif method == "mxfp4":
        for name in shapes:
            if name.endswith(MXFP4_BLOCKS):
                weight = name[:-len(MXFP4_BLOCKS)]
                scales = weight + MXFP4_SCALES
                if scales in shapes:
                    experts, rows, groups, pair_bytes = shapes[name]
                    plan[weight] = Dequantized("mxfp4", (name, scales), (experts, groups * pair_bytes * 2, rows))
    return plan


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Two E2M1 codes per byte (low nibble first) ``[..., n]`` -> fp32 ``[..., 2 n]``."""
    codes = packed.contiguous().view(torch.uint8)
    return e2m1_decode(torch.stack([codes & 0x0F, codes >> 4], dim=-1)).reshape(*packed.shape[:-1], -1)


def scale_values(scale: torch.Tensor) -> torch.Tensor:
    """fp32 multipliers of stored scales: fp32/bf16 as they are, one-byte ones as E8M0 (``2 ** (b - 127)``)."""
    if scale.dtype.is_floating_point and scale.element_size() >= 2:
        return scale.float()
    return e8m0_decode(scale.contiguous().view(torch.uint8))


def block_of(shape: Sequence[int], grid: Sequence[int], configured: Sequence[int]) -> Tuple[int, int]:
    """The (rows, cols) block of one scale: the config's ``weight_block_size`` where its grid (last blocks
    partial) is the stored one, else the block that divides the weight into the stored grid (DeepSeek-V4's
    ``[1, 32]`` FP4 experts beside ``[128, 128]`` FP8 layers)."""
    rows, cols = shape
    if (math.ceil(rows / configured[0]), math.ceil(cols / configured[1])) == tuple(grid):
        return configured[0], configured[1]
    if rows % grid[0] == 0 and cols % grid[1] == 0:
        return rows // grid[0], cols // grid[1]
    raise ConversionError(f"a [{rows}, {cols}] quantised weight cannot be cut into its [{grid[0]}, {grid[1]}] grid "
                          f"of scales (weight_block_size {list(configured)})")


def dequantize_scaled_blocks(values: torch.Tensor, scale: torch.Tensor, configured: Sequence[int]) -> torch.Tensor:
    """``values`` ``[..., rows, cols]`` (E4M3, or packed FP4 ``[..., rows, cols / 2]`` in int8/uint8) times their
    block's ``scale`` ``[..., grid rows, grid cols]`` (fp32 or E8M0), in fp32."""
    elements = unpack_fp4(values) if values.dtype in (torch.int8, torch.uint8) else values.float()
    rows, cols = elements.shape[-2:]
    block_rows, block_cols = block_of((rows, cols), scale.shape[-2:], configured)
    multipliers = scale_values(scale).repeat_interleave(block_rows, dim=-2)[..., :rows, :]
    multipliers = multipliers.repeat_interleave(block_cols, dim=-1)[..., :cols]  # [..., rows, cols]
    return elements * multipliers


def dequantize_mxfp4_experts(blocks: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """gpt-oss's MXFP4 experts: ``blocks`` ``[E, rows, G, 16]`` (uint8, two E2M1 codes per byte, low nibble
    first), ``scales`` ``[E, rows, G]`` (E8M0) -> ``[E, G * 32, rows]`` fp32 (transformers' expert layout)."""
    if tuple(blocks.shape[:-1]) != tuple(scales.shape):
        raise ConversionError(f"MXFP4 blocks {list(blocks.shape)} and scales {list(scales.shape)} do not match")
    elements = unpack_fp4(blocks)  # [E, rows, G, 32]
    values = elements * scale_values(scales)[..., None]  # exact: a power-of-two scale
    return values.reshape(*blocks.shape[:2], -1).transpose(1, 2).contiguous()  # [E, G*32, rows]


def dequantize(entry: Dequantized, tensors: List[torch.Tensor], hf_config: Dict[str, Any]) -> torch.Tensor:
    """The fp32 weight of ``entry`` from its stored tensors."""
    if entry.kind == "fp8":
        return dequantize_scaled_blocks(tensors[0], tensors[1], fp8_block(hf_config))
    return dequantize_mxfp4_experts(tensors[0], tensors[1])


def fp8_exported(hf_name: str, shape: Sequence[int]) -> bool:
    """An HF tensor an FP8 export writes as block FP8: a linear's 2-D ``.weight``, not an embedding, norm, router
    or ``lm_head`` (DeepSeek's choice)."""
    if len(shape) != 2 or not hf_name.endswith(".weight") or any(part in hf_name for part in KEPT_IN_HIGH_PRECISION):
        return False
    return hf_name.rsplit(".", 2)[-2] not in ROUTER_MODULES


def fp8_scale_shape(shape: Sequence[int], block: Sequence[int] = FP8_EXPORT_BLOCK) -> Tuple[int, int]:
    """The ``weight_scale_inv`` grid of a ``[rows, cols]`` weight: one fp32 per (partial) block."""
    return math.ceil(shape[0] / block[0]), math.ceil(shape[1] / block[1])


def quantize_fp8_blocks(weight: torch.Tensor, block: Sequence[int] = FP8_EXPORT_BLOCK
                        ) -> Tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek's block FP8 of ``weight`` ``[rows, cols]``: E4M3 values (``weight / scale_inv``, rounded to
    nearest even with saturation) and ``scale_inv`` = the block's amax / 448 (1 for an all-zero block)."""
    rows, cols = weight.shape
    grid = fp8_scale_shape(weight.shape, block)
    padded = weight.new_zeros(grid[0] * block[0], grid[1] * block[1], dtype=torch.float32)
    padded[:rows, :cols] = weight.float()
    amax = padded.reshape(grid[0], block[0], grid[1], block[1]).abs().amax(dim=(1, 3))  # [gr, gc]
    scale_inv = torch.where(amax > 0, amax / torch.finfo(torch.float8_e4m3fn).max, torch.ones_like(amax))
    spread = scale_inv.repeat_interleave(block[0], dim=0)[:rows].repeat_interleave(block[1], dim=1)[:, :cols]
    values = (weight.float() / spread).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return values, scale_inv
