"""FP8 linears: each GEMM of a linear's forward and backward on quantised operands, as Megatron-core's (Transformer
Engine's) and TorchTitan's recipes define them (``--fp8-format``, ``--fp8-recipe``).

A linear ``y = x w^T`` (x ``[tokens, K]``, w ``[N, K]``) runs three GEMMs, each reducing over one dimension:

====================  ================  ====================================
GEMM                  reduces over      operands quantised along it
====================  ================  ====================================
forward ``x w^T``     K (in)            x per row, w per row
dgrad ``g w``         N (out)           g per row, w per column
wgrad ``g^T x``       tokens            g per column, x per column
====================  ================  ====================================

Recipes (the scale of a group of elements is ``fmax / amax`` of the group, ``fmax`` the format's largest value;
elements are cast ``round(v * scale)`` with saturation and multiplied back by ``1 / scale``):

* ``delayed`` (TE's DelayedScaling, Megatron-core's default): one scale per tensor from the amax history of earlier
  steps, ``fmax / amax / 2^margin`` with amax the history's newest entry or its max (``--fp8-amax-compute-algo``)
  over ``--fp8-amax-history-len`` steps (the first step scales each tensor by its own amax, as tensorwise does). Each
  step records every tensor's amax;
  after the optimizer step the amaxes are reduced over TP and DP x CP (so every rank, and every layout, holds the
  same history) and the scales updated (:class:`DelayedScaling`). The history travels in the checkpoint.
* ``tensorwise`` (TE's current scaling, TorchTitan's ``tensorwise``): one scale per tensor, from its amax now.
* ``rowwise`` (TorchTitan's ``rowwise``): one scale per row along the GEMM's reduction dimension, rounded down to
  a power of two as TorchTitan rounds it; every operand in E4M3.
* ``blockwise`` (TE's Float8BlockScaling, DeepSeek-V3's recipe): inputs and gradients in 1 x 128 tiles along the
  reduction dimension, weights in 128 x 128 blocks (the same blocks serve the forward and dgrad); power-of-two
  scales, as TE's default.
* ``mxfp8`` (OCP MX): blocks of 32 along the reduction dimension with E8M0 scales (the spec's floor rule).

Formats: ``e4m3`` everywhere; ``hybrid`` (E4M3 forward, E5M2 gradients); ``hif8`` (HiFloat8 everywhere, per
tensor, Ascend's half-away rounding; the amax goes to 15, the top of HiF8's 3-mantissa-bit binades, not to its
largest value 2^15 where one mantissa bit is left: our choice, MindSpeed documents none).

Each GEMM runs through the run's backend (``Fp8Recipe.gemm``, chosen once per run by :func:`choose_gemm` from
``--fp8-gemm``; :mod:`core.quantization.fp8_gemm`): ``torch._scaled_mm`` on the FP8 bytes and their scales, or the
emulation, which multiplies the dequantised operands in fp32 (the numbers an FP8 GEMM with fp32 accumulation
produces, up to the order of its sums). Scales whose group a tensor-parallel split cuts (a per-tensor
scale of a split tensor, a per-row scale along a split reduction dimension) take their amax over the TP group, so
the quantised numbers, and the run, do not depend on the layout; block recipes need every rank's piece to hold
whole blocks (checked when the model is built).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn

from core.parallel_state import Group
from core.quantization.formats import (E2M1, E4M3, E5M2, MX_BLOCK, NVFP4_BLOCK, FloatFormat, hif8_quantize,
                                      mx_dequantize, mx_quantize, nvfp4_cast_blocks, nvfp4_tensor_scale)
from core.quantization.fp8_gemm import (AUTO, EMULATED, GEMM_BACKENDS, PRODUCTS, SCALED_MM, GemmChoice, Pair,
                                        Quantised, choose_backend, scaled_mm_refusal, scaled_mm_refused)
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from core.tensor_parallel.mappings import all_reduce

FP8_FORMATS = ("e4m3", "hybrid", "hif8")
FP8_RECIPES = ("delayed", "tensorwise", "rowwise", "blockwise", "mxfp8")
FP4_FORMATS = ("e2m1",)  # --fp4-format
FP4_RECIPES = ("nvfp4", "mxfp4")  # --fp4-recipe
HADAMARD_SIZE = 16  # the FP4 recipes' random Hadamard transform of the weight gradient's operands, per 16 tokens
HADAMARD_SIGN_SEED = 0  # its fixed random signs (one vector for the run, the same on every rank)
BLOCKWISE_TILE = 128  # elements per 1 x 128 tile, per side of a 128 x 128 weight block
AMAX_EPS = 1e-12  # an all-zero group keeps a finite scale (torchao's EPS)
HIF8_SCALE_TARGET = 15.0  # 1.875 x 2^3, HiF8's largest value with a 3-bit mantissa
INPUT, WEIGHT, GRAD = "input", "weight", "grad"
# the row and column (local GEMM operand dimensions) that a tensor-parallel split cuts: column-parallel splits
# N (the weight's rows, the output's columns), row-parallel splits K
SPLIT_OUT, SPLIT_IN = "out", "in"


@dataclass(frozen=True)
class Fp8Recipe:
    """One run's FP8 settings: the format (``e4m3`` | ``hybrid`` | ``hif8``), the recipe and, for ``delayed``, the
    amax history's length, how it gives the amax (``most_recent`` | ``max``) and the margin (powers of two); the
    GEMM backend (``scaled_mm`` | ``emulated``, :func:`choose_gemm`)."""

    format: str
    recipe: str
    amax_history_len: int = 1
    amax_compute_algo: str = "most_recent"
    margin: int = 0
    gemm: str = EMULATED

    def __post_init__(self) -> None:
        if self.format in FP4_FORMATS or self.recipe in FP4_RECIPES:
            if self.format not in FP4_FORMATS or self.recipe not in FP4_RECIPES:
                raise ValueError(f"--fp4-format {self.format!r} --fp4-recipe {self.recipe!r}: FP4 is e2m1 with one "
                                 f"of {FP4_RECIPES}")
        elif self.format not in FP8_FORMATS:
            raise ValueError(f"--fp8-format {self.format!r} is not one of {FP8_FORMATS}")
        elif self.recipe not in FP8_RECIPES:
            raise ValueError(f"--fp8-recipe {self.recipe!r} is not one of {FP8_RECIPES}")
        if self.gemm not in GEMM_BACKENDS:
            raise ValueError(f"an FP8 GEMM backend is one of {GEMM_BACKENDS}, not {self.gemm!r}")
        refusal = self.scaled_mm_refusal() if self.gemm == SCALED_MM else None
        if refusal is not None:
            raise ValueError(scaled_mm_refused(refusal))

    def target(self, role: str) -> float:
        """What a per-tensor scale maps ``role``'s amax to."""
        return _scale_target(self.element(role))

    def element(self, role: str) -> Optional[FloatFormat]:
        """The OCP format of ``role``'s elements (None: HiF8)."""
        if self.format == "hif8":
            return None
        if self.fp4:
            return E2M1
        return E5M2 if self.format == "hybrid" and role == GRAD else E4M3

    @property
    def block(self) -> int:
        """Elements per scale along the reduction dimension (0: the whole dimension)."""
        return {"blockwise": BLOCKWISE_TILE, "mxfp8": MX_BLOCK, "mxfp4": MX_BLOCK, "nvfp4": NVFP4_BLOCK}.get(
            self.recipe, 0)

    @property
    def fp4(self) -> bool:
        """An FP4 recipe (``--fp4-format``/``--fp4-recipe``): E2M1 elements, the gradients rounded stochastically,
        the weight gradient's operands Hadamard-transformed along the tokens."""
        return self.recipe in FP4_RECIPES

    @property
    def flag(self) -> str:
        """How the run asked for this recipe, for messages."""
        return f"--fp4-recipe {self.recipe}" if self.fp4 else f"--fp8-recipe {self.recipe}"

    @property
    def per_tensor(self) -> bool:
        """One scale per tensor: one quantisation serves every GEMM the tensor enters."""
        return self.recipe in ("delayed", "tensorwise")

    def gemm_pairs(self) -> Tuple[Pair, ...]:
        """The element formats each GEMM multiplies: forward (input, weight), dgrad (gradient, weight), wgrad
        (gradient, input)."""
        return tuple((self.element(a), self.element(b)) for a, b in ((INPUT, WEIGHT), (GRAD, WEIGHT), (GRAD, INPUT)))

    def scaled_mm_refusal(self) -> Optional[str]:
        """Why ``torch._scaled_mm`` cannot serve this recipe's GEMMs (None: it can)."""
        return scaled_mm_refusal(self.recipe, self.gemm_pairs())


def choose_gemm(recipe: Fp8Recipe, request: str = AUTO, device_type: Optional[str] = None) -> GemmChoice:
    """The run's GEMM backend for ``recipe`` from ``--fp8-gemm`` (``auto`` | ``scaled_mm`` | ``emulated``) on
    ``device_type`` (None: detected); a forced backend that cannot serve is refused (ValueError, one line)."""
    return choose_backend(request, recipe.scaled_mm_refusal(), device_type)


def _cast(values: torch.Tensor, fmt: Optional[FloatFormat]) -> torch.Tensor:
    """``values`` (already scaled) on the format's grid, saturating."""
    return hif8_quantize(values, saturate=True) if fmt is None else fmt.quantize(values)


def _scale_target(fmt: Optional[FloatFormat]) -> float:
    """What a group's amax is scaled to: the format's largest value; HiF8's largest with 3 mantissa bits (its
    tapered precision is finest for |e| <= 3, and the binades below keep small values down to 2^-22)."""
    return HIF8_SCALE_TARGET if fmt is None else fmt.max_value


def _power_of_two_below(scale: torch.Tensor) -> torch.Tensor:
    return torch.exp2(torch.floor(torch.log2(scale)))


def _cast_with(t: torch.Tensor, scale: torch.Tensor, fmt: Optional[FloatFormat]) -> Quantised:
    """``t`` times ``scale`` (broadcast over ``t``) on the format's grid, with the scale that divides it back."""
    return Quantised(_cast(t * scale, fmt), scale, fmt)


def _scaled_cast(t: torch.Tensor, amax: torch.Tensor, fmt: Optional[FloatFormat], power_of_two: bool) -> Quantised:
    """``t`` cast with the scale ``fmax / amax`` (broadcast over ``t``)."""
    scale = _scale_target(fmt) / amax.clamp(min=AMAX_EPS)
    if power_of_two:
        scale = _power_of_two_below(scale)
    return _cast_with(t, scale, fmt)


def _max_over(amax: torch.Tensor, group: Optional[Group]) -> torch.Tensor:
    """The amax over the ranks that share its group of elements (a tensor-parallel split cuts it)."""
    if group is not None and group.size > 1:
        all_reduce(amax, group, op=dist.ReduceOp.MAX)
    return amax


def _tiles(t: torch.Tensor, tile: int) -> Tuple[torch.Tensor, int]:
    """``t`` ``[rows, n]`` zero-padded along its last dimension to whole tiles: ``[rows, n / tile, tile]``."""
    pad = (-t.size(-1)) % tile
    if pad:
        t = torch.cat([t, t.new_zeros(t.size(0), pad)], dim=-1)
    return t.reshape(t.size(0), -1, tile), pad


def quantize_along(t: torch.Tensor, reduce_dim: int, recipe: Fp8Recipe, role: str,
                   tensor_split: Optional[int] = None, group: Optional[Group] = None) -> Quantised:
    """A 2-D GEMM operand ``t`` quantised for a GEMM reducing over ``reduce_dim`` (the block recipes: dequantised).

    ``tensor_split``: the dimension of ``t`` a tensor-parallel split cuts over ``group`` (None: ``t`` is whole on
    every rank), so that the scales of the groups of elements it cuts take their amax over ``group``.
    """
    fmt = recipe.element(role)
    t = t.float()
    if recipe.per_tensor:  # tensorwise; delayed without its state (DelayedScaling) takes its first step's scale
        amax = _max_over(t.abs().amax(), group if tensor_split is not None else None)
        return _scaled_cast(t, amax, fmt, power_of_two=False)
    moved = t if reduce_dim == 1 else t.t()  # [rows, reduction]
    if recipe.fp4:
        cut = group if tensor_split is not None else None
        out = Quantised(_fp4(moved, recipe, role, cut), None, fmt)
    elif recipe.recipe == "rowwise":
        amax = _max_over(moved.abs().amax(dim=1, keepdim=True), group if tensor_split == reduce_dim else None)
        out = _scaled_cast(moved, amax, fmt, power_of_two=True)  # scales [rows, 1]
    elif recipe.recipe == "mxfp8":
        out = Quantised(_mx_values(moved, fmt, "even"), None, fmt)
    else:  # blockwise: 1 x 128 tiles of inputs and gradients, 128 x 128 blocks of weights
        out = Quantised(_blockwise(moved, fmt, weight=role == WEIGHT), None, fmt)
    return out if reduce_dim == 1 else out.t()


def _fp4(t: torch.Tensor, recipe: Fp8Recipe, role: str, group: Optional[Group]) -> torch.Tensor:
    """``t`` ``[rows, reduction]`` on the FP4 grid, dequantised. Gradients round stochastically (unbiased), the
    rest to nearest even.

    * ``nvfp4`` (Transformer Engine's NVFP4BlockScaling): E2M1 elements in 1 x 16 blocks along the reduction, each
      block's scale ``amax / 6`` in E4M3 under one fp32 tensor scale ``amax_tensor / (6 * 448)`` (its amax over
      ``group`` where a TP split cuts the tensor); weights in 16 x 16 blocks, so that one quantisation of a weight
      serves the forward and the data gradient alike.
    * ``mxfp4`` (OCP MXFP4): E2M1 elements in blocks of 32 along the reduction with E8M0 scales.
    """
    rounding = "stochastic" if role == GRAD else "even"
    if recipe.recipe == "mxfp4":
        return _mx_values(t, E2M1, rounding)
    tensor_scale = nvfp4_tensor_scale(_max_over(t.abs().amax(), group))
    rows, columns = t.shape
    if role == WEIGHT:  # [rows/16, 16, columns/16, 16] -> [rows/16, columns/16, 256]: 16 x 16 blocks
        blocks = t.reshape(rows // NVFP4_BLOCK, NVFP4_BLOCK, columns // NVFP4_BLOCK, NVFP4_BLOCK).transpose(1, 2)
        blocks = blocks.reshape(rows // NVFP4_BLOCK, columns // NVFP4_BLOCK, -1)
    else:
        blocks, pad = _tiles(t, NVFP4_BLOCK)  # [rows, n/16, 16]
    elements, block_scale = nvfp4_cast_blocks(blocks, tensor_scale, rounding)  # scales [..., blocks]
    values = elements * (block_scale * tensor_scale)[..., None]
    if role == WEIGHT:
        values = values.reshape(rows // NVFP4_BLOCK, columns // NVFP4_BLOCK, NVFP4_BLOCK, NVFP4_BLOCK)
        return values.transpose(1, 2).reshape(rows, columns)
    values = values.reshape(rows, -1)
    return values[:, :values.size(1) - pad] if pad else values


def _mx_values(t: torch.Tensor, fmt: FloatFormat, rounding: str) -> torch.Tensor:
    """``t`` ``[rows, reduction]`` in OCP MX blocks of 32 along the reduction with E8M0 scales, dequantised (the
    tokens of a wgrad may end in a partial block: zeros fill it)."""
    blocks, pad = _tiles(t, MX_BLOCK)
    values = mx_dequantize(*mx_quantize(blocks.reshape(t.size(0), -1), fmt, rounding=rounding))
    return values[:, :values.size(1) - pad] if pad else values


@functools.lru_cache(maxsize=None)
def hadamard_signs(device: torch.device) -> torch.Tensor:
    """The random Hadamard transform ``H diag(signs) / 4`` ``[16, 16]`` (orthogonal): the same on every rank; made
    once per device (every FP4 backward uses it; callers must not modify it)."""
    hadamard = torch.ones(1, 1)
    while hadamard.size(0) < HADAMARD_SIZE:  # Sylvester's construction
        hadamard = torch.cat([torch.cat([hadamard, hadamard], 1), torch.cat([hadamard, -hadamard], 1)], 0)
    signs = torch.randint(0, 2, (HADAMARD_SIZE,), generator=torch.Generator().manual_seed(HADAMARD_SIGN_SEED))
    return (hadamard * (2.0 * signs - 1.0)[None, :] / HADAMARD_SIZE ** 0.5).to(device)


def hadamard_tokens(t: torch.Tensor, transform: torch.Tensor) -> torch.Tensor:
    """``t`` ``[tokens, n]`` with each run of 16 tokens mixed by ``transform`` (zero-padded to whole runs):
    ``[tokens', n]``. Applied to both operands of ``g^T x`` it leaves the product unchanged and spreads
    outliers over 16 tokens before they are quantised."""
    pad = (-t.size(0)) % HADAMARD_SIZE
    t = torch.cat([t, t.new_zeros(pad, t.size(1))]) if pad else t
    runs = t.float().reshape(-1, HADAMARD_SIZE, t.size(1))  # [tokens/16, 16, n]
    return torch.matmul(transform, runs).reshape(-1, t.size(1))


def _blockwise(t: torch.Tensor, fmt: Optional[FloatFormat], weight: bool) -> torch.Tensor:
    """``t`` ``[rows, reduction]`` in 1 x 128 tiles (``weight``: 128 x 128 blocks), power-of-two scales."""
    rows = t.size(0)
    tiles, pad = _tiles(t, BLOCKWISE_TILE)  # [rows, n/128, 128]
    amax = tiles.abs().amax(dim=-1, keepdim=True)  # [rows, n/128, 1]
    if weight:  # one amax per 128 rows of a tile column
        row_pad = (-rows) % BLOCKWISE_TILE
        padded = torch.cat([amax, amax.new_zeros(row_pad, *amax.shape[1:])]) if row_pad else amax
        block = padded.reshape(-1, BLOCKWISE_TILE, *amax.shape[1:]).amax(dim=1, keepdim=True)
        amax = block.expand(-1, BLOCKWISE_TILE, -1, -1).reshape(-1, *amax.shape[1:])[:rows]
    out = _scaled_cast(tiles, amax, fmt, power_of_two=True).dequantised().reshape(rows, -1)
    return out[:, :out.size(1) - pad] if pad else out


ROLES = (INPUT, WEIGHT, GRAD)


class DelayedScaling:
    """One linear's delayed-scaling state: per role (input, weight, gradient) the amax history ``[3, length]``, the
    scale in use ``[3]`` and the step's running amax ``[3]`` (this rank's, reduced when the step ends). fp32, on the
    device of the first product; not parameters: saved by the FP8 transform beside the weights."""

    def __init__(self, recipe: Fp8Recipe) -> None:
        self.recipe = recipe
        self.history = self.scale = self.step_amax = None  # created on the first product, on its device
        self.updates = 0  # steps whose amaxes entered the history

    def ensure(self, device: torch.device) -> None:
        if self.history is None:
            self.history = torch.zeros(len(ROLES), self.recipe.amax_history_len, device=device)
            self.scale = torch.ones(len(ROLES), device=device)
            self.step_amax = torch.zeros(len(ROLES), device=device)

    def quantize(self, t: torch.Tensor, role: str, group: Optional[Group] = None) -> Quantised:
        """``t`` cast with ``role``'s scale; its amax joins the step's (the backward's second
        look at the saved input and weight adds the same amax again). Before the first update the scale is the
        tensor's own, as tensorwise takes it (its amax over ``group``, given when a TP split cuts ``t``): TE starts
        from scale 1 instead, which rounds tiny gradients to zero and makes the first step depend on how DP
        averages them."""
        index = ROLES.index(role)
        t = t.float()
        amax = t.abs().amax()
        with torch.no_grad():
            self.step_amax[index] = torch.maximum(self.step_amax[index], amax)
        if self.updates == 0:
            return _scaled_cast(t, _max_over(amax.detach().clone(), group), self.recipe.element(role),
                                power_of_two=False)
        return _cast_with(t, self.scale[index], self.recipe.element(role))

    def update(self, step_amax: torch.Tensor) -> None:
        """The step's amax (reduced over the ranks) enters the history; the scales follow (an amax of 0, or one
        that is not finite, keeps the old scale)."""
        recipe = self.recipe
        self.history = torch.roll(self.history, 1, dims=1)
        self.history[:, 0] = step_amax
        amax = self.history[:, 0] if recipe.amax_compute_algo == "most_recent" else self.history.amax(dim=1)
        targets = torch.tensor([recipe.target(role) for role in ROLES], device=amax.device)
        fresh = targets / amax / 2.0 ** recipe.margin
        self.scale = torch.where((amax > 0) & torch.isfinite(fresh), fresh, self.scale)
        self.step_amax.zero_()
        self.updates += 1

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return {"amax_history": self.history.clone(), "scale": self.scale.clone(),
                "updates": torch.tensor(self.updates)}

    def load_state_dict(self, saved: Dict[str, torch.Tensor], device: torch.device) -> None:
        self.ensure(device)
        if tuple(saved["amax_history"].shape) != tuple(self.history.shape):
            raise ValueError(f"the checkpoint's amax history is {list(saved['amax_history'].shape)}, this run's "
                             f"{list(self.history.shape)} (--fp8-amax-history-len)")
        self.history.copy_(saved["amax_history"])
        self.scale.copy_(saved["scale"])
        self.updates = int(saved["updates"])


def update_delayed_scaling(states: Sequence[DelayedScaling], groups: Sequence[Group]) -> None:
    """End of a step: every linear's step amax reduced over ``groups`` (TP, DP x CP; one all-reduce each for all
    linears), then each history and scale updated."""
    live = [state for state in states if state.history is not None]
    if not live:
        return
    amax = torch.stack([state.step_amax for state in live])  # [linears, 3]
    for group in groups:
        _max_over(amax, group)
    for state, reduced in zip(live, amax):
        state.update(reduced)


def check_blocks(recipe: Fp8Recipe, shape: Tuple[int, int], split: Optional[str], pieces: Tuple[int, ...],
                 name: str) -> None:
    """The block recipes' constraints on a linear's weight ``shape`` ``[N, K]``: MXFP8's blocks of 32 need both
    dimensions in multiples of 32; under a TP split (``split``) every rank's piece of each fused segment
    (``pieces``, the per-rank sizes along the split dimension) must hold whole blocks, so that a rank's blocks are
    the blocks of one process. One line naming the linear and the fix."""
    block = recipe.block
    if not block:
        return
    if recipe.recipe in ("mxfp8", "mxfp4", "nvfp4") and any(size % block for size in shape):
        raise ValueError(f"{recipe.flag}: {name} is [{shape[0]}, {shape[1]}], a dimension not divisible by "
                         f"{block} (the recipe's block); pick sizes in multiples of {block} or another recipe")
    broken = [piece for piece in pieces if piece % block]
    if split is not None and broken:
        raise ValueError(f"{recipe.flag}: {name}'s {'output' if split == SPLIT_OUT else 'input'} "
                         f"dimension gives each tensor-parallel rank pieces of {broken[0]}, not a multiple of the "
                         f"{block}-element blocks; change --tensor-model-parallel-size or the model's sizes")


class _Operands:
    """The quantised operands of one pass (forward or backward) of a linear, each made once: under a per-tensor
    recipe one quantisation of a tensor serves every GEMM it enters, otherwise one per reduction dimension."""

    def __init__(self, recipe: Fp8Recipe, split: Optional[str], group: Optional[Group],
                 delayed: Optional[DelayedScaling]) -> None:
        self.recipe, self.split, self.group, self.delayed = recipe, split, group, delayed
        self.made: Dict[Tuple[str, Optional[int]], Quantised] = {}

    def __call__(self, t: torch.Tensor, role: str, reduce_dim: int) -> Quantised:
        """``t`` (2-D) quantised as ``role`` for a GEMM reducing over ``reduce_dim``."""
        key = (role, None if self.recipe.per_tensor else reduce_dim)
        if key not in self.made:
            tensor_split = _tensor_split(role, self.split)
            if self.delayed is not None:
                self.made[key] = self.delayed.quantize(t, role, self.group if tensor_split is not None else None)
            else:
                self.made[key] = quantize_along(t, reduce_dim, self.recipe, role, tensor_split, self.group)
        return self.made[key]


def _tensor_split(role: str, split: Optional[str]) -> Optional[int]:
    """The dimension of ``role``'s 2-D operand (x ``[tokens, K]``, w ``[N, K]``, g ``[tokens, N]``) a TP split
    cuts: column-parallel splits N, row-parallel K."""
    if split is None:
        return None
    return {(INPUT, SPLIT_IN): 1, (WEIGHT, SPLIT_OUT): 0, (WEIGHT, SPLIT_IN): 1, (GRAD, SPLIT_OUT): 1}.get(
        (role, split))


class Fp8Linear(torch.autograd.Function):
    """``x w^T`` with each GEMM on quantised operands through the recipe's backend (see the module docstring);
    fp32 products."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, recipe: Fp8Recipe, split: Optional[str],
                group: Optional[Group], delayed: Optional[DelayedScaling]) -> torch.Tensor:
        # x [..., K], weight [N, K] -> [..., N]
        ctx.save_for_backward(x, weight)
        ctx.recipe, ctx.split, ctx.group, ctx.delayed = recipe, split, group, delayed
        if delayed is not None:
            delayed.ensure(x.device)
        operand, product = _Operands(recipe, split, group, delayed), PRODUCTS[recipe.gemm]
        rows = x.reshape(-1, x.size(-1))  # [tokens, K]
        y = product(operand(rows, INPUT, 1), operand(weight, WEIGHT, 1).t())  # [tokens, N], reduces over K
        return y.to(x.dtype).view(*x.shape[:-1], weight.size(0))

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        x, weight = ctx.saved_tensors
        operand, product = _Operands(ctx.recipe, ctx.split, ctx.group, ctx.delayed), PRODUCTS[ctx.recipe.gemm]
        grad = grad_output.reshape(-1, grad_output.size(-1))  # [tokens, N]
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:  # [tokens, N] @ [N, K], reduces over N
            grad_x = product(operand(grad, GRAD, 1), operand(weight, WEIGHT, 0)).to(x.dtype).view(x.shape)
        if ctx.needs_input_grad[1]:  # [N, tokens] @ [tokens, K], reduces over the tokens, never split by TP
            rows = x.reshape(-1, x.size(-1))
            if ctx.recipe.fp4:  # both operands mixed per 16 tokens: the same product, tamer blocks
                transform = hadamard_signs(grad.device)
                grad, rows = hadamard_tokens(grad, transform), hadamard_tokens(rows, transform)
            grad_w = product(operand(grad, GRAD, 0).t(), operand(rows, INPUT, 0)).to(weight.dtype)  # [N, K]
        return grad_x, grad_w, None, None, None, None


def fp8_linear(x: torch.Tensor, weight: torch.Tensor, recipe: Fp8Recipe, split: Optional[str] = None,
               group: Optional[Group] = None, delayed: Optional[DelayedScaling] = None) -> torch.Tensor:
    """``x w^T`` through :class:`Fp8Linear` (``split``: how TP splits this linear over ``group``; ``delayed``: the
    linear's state under the delayed recipe)."""
    return Fp8Linear.apply(x, weight, recipe, split, group, delayed)


class Fp8ColumnParallelLinear(ColumnParallelLinear):
    """A column-parallel linear whose product runs through :class:`Fp8Linear` (made by :func:`to_fp8`)."""

    fp8: Fp8Recipe
    fp8_state: Optional[DelayedScaling] = None

    def product(self, x: torch.Tensor) -> torch.Tensor:
        y = fp8_linear(x, self.weight, self.fp8, SPLIT_OUT if self.group.size > 1 else None, self.group,
                       self.fp8_state)  # [s, b, out/tp]
        return y + self.bias if self.bias is not None else y


class Fp8RowParallelLinear(RowParallelLinear):
    """A row-parallel linear whose product runs through :class:`Fp8Linear` (made by :func:`to_fp8`)."""

    fp8: Fp8Recipe
    fp8_state: Optional[DelayedScaling] = None

    def product(self, x: torch.Tensor) -> torch.Tensor:
        return fp8_linear(x, self.weight, self.fp8, SPLIT_IN if self.group.size > 1 else None, self.group,
                          self.fp8_state)  # [s, b, out], a partial sum over TP


FP8_CLASSES = {ColumnParallelLinear: Fp8ColumnParallelLinear, RowParallelLinear: Fp8RowParallelLinear}


def to_fp8(linear: nn.Module, recipe: Fp8Recipe) -> None:
    """Make a column- or row-parallel linear (its own class, not a subclass such as LoRA's) compute in FP8 under
    ``recipe``, in place: same parameters, names and state dict."""
    linear.__class__ = FP8_CLASSES[type(linear)]
    linear.fp8 = recipe
    linear.fp8_state = DelayedScaling(recipe) if recipe.recipe == "delayed" else None
