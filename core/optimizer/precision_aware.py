"""``--use-precision-aware-optimizer``: AdamW whose state is stored in fewer bytes, stepped in fp32.

Megatron-core's precision-aware optimizer, for the distributed optimizer
(core/optimizer/distrib_optimizer.py), which hands this optimizer its pieces:

* ``--exp-avg-dtype`` / ``--exp-avg-sq-dtype`` {fp32, fp16, bf16, fp8}: the
  storage of Adam's moments. Each step loads a parameter's moments to fp32,
  runs the AdamW update in fp32 (decoupled weight decay, bias corrections and
  eps exactly as ``torch.optim.AdamW(foreach=False)``: with every dtype fp32
  the numbers are the same, bit for bit) and stores the moments back.
* bf16 is a plain round-to-nearest cast (fp32's range, elementwise).
* fp8 (``torch.float8_e4m3fn``, 1 byte per element) and fp16 are kept with one
  fp32 scale per parameter beside them (``<moment>_scale``):
  ``stored = cast(value * scale)``, ``value = stored / scale``, as Transformer
  Engine's FusedAdam (Megatron's backend) keeps them. A plain fp16 cast would
  flush ``exp_avg_sq`` (about ``1e-3 * grad**2`` after the first step) to zero
  below 6e-8, and ``exp_avg / (0 + eps)`` is a huge step: a 2-layer model
  trained 5 steps gets loss 4.21 instead of 4.11 that way.
* The scale is the power of two ``2 ** floor(log2(target / amax))`` with
  target = the dtype's largest value + half its top spacing (fp8: 448 + 16,
  fp16: 65504 + 16). A power of two makes both directions exact apart from
  the cast's own rounding, and that target makes quantisation idempotent: a
  dequantised tensor re-quantises to the same values and scale, so a
  checkpoint that stores dequantised fp32 values resumes exactly (with the
  largest value itself as target, a maximum that rounds down to half of it,
  224 in fp8, would double the scale on reload). Values between the largest
  value and the target saturate, an error no larger than the cast's rounding
  there.
* ``exp_avg_sq`` spans the square of the gradients' dynamic range, and e4m3
  holds about 17 binades under one scale: it would flush the second moment of
  small-gradient elements while their first moment survives. In fp8 it is
  therefore stored as its square root (the gradients' own range, like
  ``exp_avg``) and squared on load: relative error 2**-4 on
  ``sqrt(exp_avg_sq)``, the quantity the update divides by. (fp16, 40
  binades, stores it as it is.)
* ``amax`` is taken over the whole parameter, not this rank's piece: the
  distributed optimizer sets :attr:`PrecisionAwareAdamW.reduce_amaxes` to an
  all-reduce (MAX) over DP of a vector of per-parameter amaxes, one
  collective per step for both moments (:class:`ShardAmaxReduction`), so the
  stored moments are the same at every DP size. (A TP shard is its own
  tensor: the scale is per TP shard.) The step runs twice over the scaled
  moments, once for their amaxes and once for the update, so no fp32 copy of
  every parameter's state exists at once: at most one piece's at a time.
* Master weights in fp16 (``--main-params-dtype fp16``): each is upcast to
  fp32 for its update and rounded back (a plain cast: weights sit well inside
  fp16's range). Their fp32 gradients (torch refuses a ``.grad`` of another
  dtype) are passed as ``param.decoupled_grad`` (:func:`attach_grad`).

Checkpoints store the moments as fp32 values (:func:`moments_fp32`, the
dequantised stored moments) and load them back with :func:`load_moments`,
which re-quantises with the same parameter-wide amax; both also serve plain
``torch.optim.AdamW`` state, so a checkpoint moves between the two.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn

from core.distributed.grad_buffer import GradBuffers
from core.optimizer.swap import MOMENTS
from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce

FP8 = torch.float8_e4m3fn
# the flags' names of the storage dtypes (--main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype, ...)
STORAGE_DTYPES: Dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                                          "fp8": FP8}
# moment storage kept with a per-parameter scale: dtype -> (largest value, scale target = it + half its top spacing)
SCALED: Dict[torch.dtype, Tuple[float, float]] = {FP8: (448.0, 464.0), torch.float16: (65504.0, 65520.0)}
# (params stepped, their local amaxes [n, k]) -> the amaxes over every rank that holds a piece of each
AmaxReducer = Callable[[List[torch.Tensor], torch.Tensor], torch.Tensor]


# ---- scaled storage ------------------------------------------------------------------------------------
def storage_scale(amax: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The power of two ``2 ** floor(log2(target / amax))`` (elementwise, fp32); 1 where ``amax`` is 0."""
    ratio = (SCALED[dtype][1] / amax.float()).clamp(max=torch.finfo(torch.float32).max)
    ratio = torch.where(amax > 0, ratio, torch.ones_like(ratio))
    _, exponent = torch.frexp(ratio)  # ratio = mantissa * 2**exponent, mantissa in [0.5, 1): exact, no log2
    return torch.ldexp(torch.ones_like(ratio), exponent - 1)


def quantise(value: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``cast(value * scale)``; the product is exact (a power of two), at most the target, saturated."""
    largest = SCALED[dtype][0]
    return (value.float() * scale).clamp_(-largest, largest).to(dtype)


def dequantise(stored: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The fp32 values of scaled ``stored`` (exact: a division by a power of two)."""
    return stored.float() / scale


def _as_root(key: str, dtype: torch.dtype) -> bool:
    """Whether a moment is stored as its square root (``exp_avg_sq`` in fp8)."""
    return dtype == FP8 and key == "exp_avg_sq"


def _stored_amax(key: str, value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """amax of what is quantised of an fp32 moment (sqrt is monotone: the root of the max is the max of the
    roots)."""
    amax = value.abs().max() if value.numel() else value.new_zeros(())
    return amax.sqrt() if _as_root(key, dtype) else amax


def _advance(key: str, moment: torch.Tensor, grad: torch.Tensor, beta1: float, beta2: float) -> None:
    """One moment's running average, in place, as torch's single-tensor Adam computes it."""
    if key == "exp_avg":
        moment.lerp_(grad, 1 - beta1)
    else:
        moment.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)


# ---- gradients of parameters stored in another dtype ---------------------------------------------------
def attach_grad(param: torch.Tensor, grad: torch.Tensor) -> None:
    """``param.grad = grad``; an fp32 gradient of an fp16 master goes to ``param.decoupled_grad``."""
    if grad.dtype == param.dtype:
        param.grad = grad
    else:
        param.decoupled_grad = grad


def drop_grad(param: torch.Tensor) -> None:
    param.grad = None
    if getattr(param, "decoupled_grad", None) is not None:
        param.decoupled_grad = None


def _grad_of(param: torch.Tensor) -> Optional[torch.Tensor]:
    grad = getattr(param, "decoupled_grad", None)
    return param.grad if grad is None else grad


# ---- the optimizer -----------------------------------------------------------------------------------
class PrecisionAwareAdamW(torch.optim.Optimizer):
    """AdamW with its moments stored in ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` and parameters of any float
    dtype (fp16 masters), every update computed in fp32. See the module docstring."""

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, exp_avg_dtype: torch.dtype = torch.float32,
                 exp_avg_sq_dtype: torch.dtype = torch.float32) -> None:
        for dtype in (exp_avg_dtype, exp_avg_sq_dtype):
            if dtype not in STORAGE_DTYPES.values():
                raise ValueError(f"moment dtype {dtype} is not one of {sorted(STORAGE_DTYPES)}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        self.dtypes: Dict[str, torch.dtype] = {"exp_avg": exp_avg_dtype, "exp_avg_sq": exp_avg_sq_dtype}
        self.scaled_keys: Tuple[str, ...] = tuple(key for key in MOMENTS if self.dtypes[key] in SCALED)
        self.reduce_amaxes: AmaxReducer = lambda params, amaxes: amaxes  # the distributed optimizer's: over DP

    # ---- storage ---------------------------------------------------------------------------------
    def _state(self, param: torch.Tensor) -> Dict[str, torch.Tensor]:
        state = self.state[param]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32)
            for key in MOMENTS:
                state[key] = torch.zeros(param.shape, dtype=self.dtypes[key], device=param.device)
                if self.dtypes[key] in SCALED:
                    state[key + "_scale"] = torch.ones((), dtype=torch.float32, device=param.device)
        return state

    def moment(self, param: torch.Tensor, key: str) -> torch.Tensor:
        """The fp32 value of a moment: the stored tensor itself in fp32 storage, else a new tensor."""
        state, dtype = self._state(param), self.dtypes[key]
        if dtype == torch.float32:
            return state[key]
        if dtype not in SCALED:
            return state[key].float()
        value = dequantise(state[key], state[key + "_scale"])
        return value * value if _as_root(key, dtype) else value

    def store_moment(self, param: torch.Tensor, key: str, value: torch.Tensor,
                     scale: Optional[torch.Tensor] = None) -> None:
        """Round an fp32 moment into its storage (fp8, fp16: with ``scale``, from the parameter-wide amax)."""
        state, dtype = self._state(param), self.dtypes[key]
        if dtype in SCALED:
            state[key].copy_(quantise(value.sqrt() if _as_root(key, dtype) else value, scale, dtype))
            state[key + "_scale"].copy_(scale)
        elif value is not state[key]:
            state[key].copy_(value)  # round to nearest even

    def scales(self, params: List[torch.Tensor], amaxes: torch.Tensor) -> List[Dict[str, torch.Tensor]]:
        """Per parameter, the scale of each scaled moment from this rank's amaxes ``[n, len(scaled_keys)]``,
        taken over every rank that holds a piece of the parameter (:attr:`reduce_amaxes`: collective, so every
        rank calls it, with or without parameters)."""
        amaxes = self.reduce_amaxes(params, amaxes)  # [n, k]
        scales = {key: storage_scale(amaxes[:, column], self.dtypes[key])
                  for column, key in enumerate(self.scaled_keys)}
        return [{key: scales[key][row] for key in self.scaled_keys} for row in range(len(params))]

    def local_amaxes(self, values: List[Dict[str, torch.Tensor]]) -> torch.Tensor:
        """``[n, len(scaled_keys)]``: per parameter, the amax of what is quantised of each scaled moment's fp32
        value (no rows: on the CPU; the reduction places its table on the buffers' device)."""
        rows = [torch.stack([_stored_amax(key, value[key], self.dtypes[key]).float() for key in self.scaled_keys])
                for value in values]
        return torch.stack(rows) if rows else torch.zeros(0, len(self.scaled_keys))

    # ---- the step --------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None) -> None:
        todo = [(group, p) for group in self.param_groups for p in group["params"] if _grad_of(p) is not None]
        scales = self._next_scales(todo)
        for (group, param), param_scales in zip(todo, scales):
            self._update(group, param, param_scales)

    def _next_scales(self, todo: List[Tuple[Dict, torch.Tensor]]) -> List[Dict[str, torch.Tensor]]:
        """First pass over the scaled moments: their next values, one parameter at a time, kept only for the
        amaxes (no fp32 copy of every parameter's state at once)."""
        if not self.scaled_keys:
            return [{} for _ in todo]
        amaxes = []
        for group, param in todo:
            beta1, beta2 = group["betas"]
            grad = _grad_of(param).float()
            row = {}
            for key in self.scaled_keys:
                row[key] = self.moment(param, key)  # a new tensor (scaled storage)
                _advance(key, row[key], grad, beta1, beta2)
            amaxes.append(self.local_amaxes([row])[0])
        params = [param for _, param in todo]
        return self.scales(params, torch.stack(amaxes) if amaxes else torch.zeros(0, len(self.scaled_keys)))

    def _update(self, group: Dict, param: torch.Tensor, scales: Dict[str, torch.Tensor]) -> None:
        """torch's single-tensor AdamW on fp32 values of the parameter and its moments, then stored back."""
        state = self._state(param)
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        grad = _grad_of(param).float()
        value = param if param.dtype == torch.float32 else param.float()  # [piece]
        exp_avg, exp_avg_sq = self.moment(param, "exp_avg"), self.moment(param, "exp_avg_sq")
        state["step"] += 1
        if weight_decay != 0:
            value.mul_(1 - lr * weight_decay)
        _advance("exp_avg", exp_avg, grad, beta1, beta2)
        _advance("exp_avg_sq", exp_avg_sq, grad, beta1, beta2)
        step = state["step"].item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        denom = (exp_avg_sq.sqrt() / bias_correction2 ** 0.5).add_(eps)
        value.addcdiv_(exp_avg, denom, value=-step_size)
        if value is not param:
            param.copy_(value)  # round to the storage dtype (fp16 masters)
        self.store_moment(param, "exp_avg", exp_avg, scales.get("exp_avg"))
        self.store_moment(param, "exp_avg_sq", exp_avg_sq, scales.get("exp_avg_sq"))

    def load_state_dict(self, state_dict: Dict) -> None:
        """torch's, keeping each moment's storage dtype (torch casts per-parameter state to the parameter's)."""
        super().load_state_dict(state_dict)
        params = [p for group in self.param_groups for p in group["params"]]
        for index, saved in state_dict["state"].items():
            param = params[index]
            for key, value in saved.items():
                if key != "step" and torch.is_tensor(value):
                    self.state[param][key] = value.to(param.device, copy=True)


# ---- checkpoints: fp32 values, whatever the storage ----------------------------------------------------
def moments_fp32(optimizer: torch.optim.Optimizer, param: torch.Tensor,
                 keys: Sequence[str] = MOMENTS) -> Dict[str, torch.Tensor]:
    """The fp32 values of ``param``'s moments (zeros before the first step); another optimizer's state tensors
    ``keys`` (Muon's or SGD's momentum) as they are."""
    if isinstance(optimizer, PrecisionAwareAdamW):
        return {key: optimizer.moment(param, key).detach() for key in MOMENTS}
    state = optimizer.state.get(param, {})
    return {key: state[key].float() if key in state else torch.zeros_like(param, dtype=torch.float32)
            for key in keys}


def load_moments(optimizer: torch.optim.Optimizer, values: Dict[torch.Tensor, Dict[str, torch.Tensor]]) -> None:
    """Store fp32 moment values by parameter (the inverse of :func:`moments_fp32`). Scaled storage: the scales
    from the parameter-wide amax, as the step sets them (collective over DP: every rank calls it)."""
    if not isinstance(optimizer, PrecisionAwareAdamW):
        for param, entries in values.items():
            optimizer.state[param].update({key: value.to(param.device, torch.float32)
                                           for key, value in entries.items()})
        return
    params = list(values)
    full = [{key: entries.get(key, torch.zeros_like(param, dtype=torch.float32)).to(param.device)
             for key in MOMENTS} for param, entries in values.items()]
    scales = optimizer.scales(params, optimizer.local_amaxes(full)) if optimizer.scaled_keys else [{}] * len(full)
    for param, entries, param_scales in zip(params, full, scales):
        for key in MOMENTS:
            optimizer.store_moment(param, key, entries[key], param_scales.get(key))


# ---- the amax over DP ----------------------------------------------------------------------------------
class ShardAmaxReduction:
    """MAX over DP of per-parameter amaxes: each DP group (dense, expert) gets one vector with a slot for
    every parameter of its buffers, this rank's pieces filled in, all-reduced once (also when this rank
    has no piece, so every rank joins)."""

    def __init__(self, groups: List[Tuple[Group, int]], slots: Dict[int, Tuple[int, int]],
                 device: torch.device) -> None:
        self.groups = groups  # [(group, number of parameters)]
        self.slots = slots  # id(optimizer param) -> (index in groups, slot)
        self.device = device  # where the collectives run (the buffers')

    def __call__(self, params: List[torch.Tensor], amaxes: torch.Tensor) -> torch.Tensor:
        result = amaxes.to(self.device, copy=True)  # [n, k]
        for index, (group, size) in enumerate(self.groups):
            rows = [row for row, p in enumerate(params) if self.slots[id(p)][0] == index]
            slots = torch.tensor([self.slots[id(params[row])][1] for row in rows], dtype=torch.long,
                                 device=self.device)
            table = torch.zeros(size, amaxes.shape[1], dtype=torch.float32, device=self.device)  # [params, k]
            table[slots] = result[rows]
            all_reduce(table, group, op=dist.ReduceOp.MAX)
            result[rows] = table[slots]
        return result.to(amaxes.device)


def shard_amax_reduction(buffers: Sequence[GradBuffers], owners: Sequence[Tuple[nn.Parameter, torch.Tensor]]
                         ) -> ShardAmaxReduction:
    """The reduction for the distributed optimizer's pieces, ``owners``: (model parameter, optimizer param).
    Slots follow the buffers' parameter order, the same on every rank of a DP group."""
    groups: List[Tuple[Group, int]] = []
    by_ranks: Dict[Tuple[int, ...], int] = {}
    slot_of: Dict[int, Tuple[int, int]] = {}  # id(model param) -> (group index, slot)
    for model_buffers in buffers:
        for buffer in model_buffers.buffers:
            group = buffer.buckets[0].dp_group
            index = by_ranks.setdefault(tuple(group.ranks), len(by_ranks))
            if index == len(groups):
                groups.append((group, 0))
            for param in buffer.params:
                slot_of[id(param)] = (index, groups[index][1])
                groups[index] = (group, groups[index][1] + 1)
    device = buffers[0].buffers[0].data.device if buffers and buffers[0].buffers else torch.device("cpu")
    return ShardAmaxReduction(groups, {id(master): slot_of[id(param)] for param, master in owners}, device)
