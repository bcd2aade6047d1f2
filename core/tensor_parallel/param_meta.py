"""What a parameter is, recorded in one place: :class:`ParamMeta` (DESIGN.md, principle 12).

Every parameter the model builds carries one attribute, ``param.meta``, a
frozen :class:`ParamMeta`: its tensor-parallel shard spec, whether its
gradient is a partial sum over TP, whether it is shared across pipeline
stages, how it is initialised and whether it is an expert parameter.
Initialisation, gradient sync, clipping, FSDP, the optimizers and the
checkpoint converter read it through :func:`param_meta`, which gives the
default record for parameters created by other code. Code that makes new
parameter objects (``to_empty``, FSDP, master copies) copies the one
attribute with :func:`copy_meta`; nobody keeps a list of attribute names.

A TP-split tensor is described by a :class:`TPShard`: a list of
:class:`Segment` s (fused QKV, gate/up), each split over TP by whole units
(heads). A segment with fewer units than TP ranks (GQA key/value heads with
TP > KV heads) is replicated: rank ``r`` holds unit ``r * units // tp``.
The replicas compute partial gradients; :func:`sum_replicas_over_tp` sums
them for any flat window of the local tensor (the whole tensor for DDP, a
DP shard for FSDP) and :meth:`TPShard.replica_weights` counts each replica
once in the gradient norm.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import torch

from core.tensor_parallel.mappings import all_gather_along_dim, all_reduce

if TYPE_CHECKING:
    from core.parallel_state import Group, ParallelState

META_ATTRIBUTE = "meta"


@dataclass(frozen=True)
class Segment:
    """A run of ``units`` equal blocks of ``unit_size`` rows (e.g. heads x head_dim)."""

    units: int
    unit_size: int = 1

    @property
    def size(self) -> int:
        return self.units * self.unit_size

    def local_units(self, tp: int) -> int:
        return max(self.units // tp, 1)

    def first_unit(self, rank: int, tp: int) -> int:
        return rank * self.units // tp

    def is_replicated(self, tp: int) -> bool:
        return self.units < tp


@dataclass(frozen=True)
class TPShard:
    """How a full tensor is split over the TP ranks along ``dim``."""

    dim: int
    segments: Tuple[Segment, ...]

    @staticmethod
    def even(dim: int, size: int) -> "TPShard":
        return TPShard(dim, (Segment(size, 1),))

    @property
    def full_size(self) -> int:
        return sum(seg.size for seg in self.segments)

    def local_size(self, tp: int) -> int:
        return sum(seg.local_units(tp) * seg.unit_size for seg in self.segments)

    def full_shape(self, local_shape: Sequence[int]) -> List[int]:
        shape = list(local_shape)
        shape[self.dim] = self.full_size
        return shape

    def validate(self, tp: int, what: str) -> None:
        for seg in self.segments:
            if seg.units >= tp and seg.units % tp != 0:
                raise ValueError(f"{what}: {seg.units} units do not split evenly over {tp} TP ranks")
            if seg.units < tp and tp % seg.units != 0:
                raise ValueError(f"{what}: {seg.units} replicated units do not divide {tp} TP ranks")

    def shard(self, full: torch.Tensor, rank: int, tp: int) -> torch.Tensor:
        """This rank's slice of the full tensor."""
        pieces, offset = [], 0
        for seg in self.segments:
            start = offset + seg.first_unit(rank, tp) * seg.unit_size
            pieces.append(full.narrow(self.dim, start, seg.local_units(tp) * seg.unit_size))
            offset += seg.size
        return torch.cat(pieces, dim=self.dim) if len(pieces) > 1 else pieces[0].clone()

    def unshard(self, locals_: Sequence[torch.Tensor]) -> torch.Tensor:
        """The full tensor from every rank's slice (replicated units taken from their first holder)."""
        tp = len(locals_)
        splits = [seg.local_units(tp) * seg.unit_size for seg in self.segments]
        per_rank = [list(t.split(splits, dim=self.dim)) for t in locals_]
        pieces = []
        for index, seg in enumerate(self.segments):
            if seg.is_replicated(tp):
                holders = [unit * tp // seg.units for unit in range(seg.units)]
                pieces.extend(per_rank[r][index] for r in holders)
            else:
                pieces.extend(per_rank[r][index] for r in range(tp))
        return torch.cat(pieces, dim=self.dim)

    def place(self, local: torch.Tensor, rank: int, tp: int, full: torch.Tensor) -> None:
        """Copy rank ``rank``'s slice into its place in ``full`` (the inverse of :meth:`shard`, one rank at a
        time; a replicated unit is copied by its first holder only, as :meth:`unshard` takes it)."""
        offset, local_offset = 0, 0
        for seg in self.segments:
            rows = seg.local_units(tp) * seg.unit_size
            unit = seg.first_unit(rank, tp)
            if not seg.is_replicated(tp) or unit * tp // seg.units == rank:
                full.narrow(self.dim, offset + unit * seg.unit_size, rows).copy_(
                    local.narrow(self.dim, local_offset, rows))
            offset, local_offset = offset + seg.size, local_offset + rows

    def has_replicas(self, tp: int) -> bool:
        return any(seg.is_replicated(tp) for seg in self.segments)

    def replicated_masks(self, local_shape: Sequence[int], tp: int,
                         device: Optional[torch.device] = None) -> List[Tuple[Segment, torch.Tensor]]:
        """Per replicated segment: (segment, flat bool mask over the local tensor of its elements).

        Built once per (shape, TP, device) and shared: callers must not modify the masks.
        """
        return _replicated_masks(self, tuple(local_shape), tp, torch.device(device or "cpu"))

    def replica_weights(self, local_shape: Sequence[int], tp: int,
                        device: Optional[torch.device] = None) -> torch.Tensor:
        """Per local element, flat: 1 for split units, ``units / tp`` for replicated ones.

        Summing ``weight * grad**2`` over every TP rank counts each replicated unit once.
        Built once per (shape, TP, device) and shared: callers must not modify it.
        """
        return _replica_weights(self, tuple(local_shape), tp, torch.device(device or "cpu"))


@functools.lru_cache(maxsize=None)
def _replicated_masks(shard: TPShard, local_shape: Tuple[int, ...], tp: int,
                      device: torch.device) -> List[Tuple[Segment, torch.Tensor]]:
    result, offset = [], 0
    for seg in shard.segments:
        rows = seg.local_units(tp) * seg.unit_size
        if seg.is_replicated(tp):
            mask = torch.zeros(local_shape, dtype=torch.bool)
            mask.narrow(shard.dim, offset, rows).fill_(True)
            result.append((seg, mask.view(-1).to(device)))
        offset += rows
    return result


@functools.lru_cache(maxsize=None)
def _replica_weights(shard: TPShard, local_shape: Tuple[int, ...], tp: int, device: torch.device) -> torch.Tensor:
    weights, offset = torch.ones(local_shape), 0
    for seg in shard.segments:
        rows = seg.local_units(tp) * seg.unit_size
        if seg.is_replicated(tp):
            weights.narrow(shard.dim, offset, rows).fill_(seg.units / tp)
        offset += rows
    return weights.view(-1).to(device)


def sum_replicas_over_tp(grad: torch.Tensor, shard: TPShard, local_shape: Sequence[int], flat_start: int,
                         group: "Group") -> None:
    """Sum, in place, the replicas' partial gradients of replicated units over the TP group.

    ``grad`` is the flat window ``[flat_start, flat_start + n)`` of the flattened
    local tensor of shape ``local_shape`` (the whole tensor: ``flat_start=0``).
    Every TP rank calls it with the same window. Per replicated segment, each rank
    writes its unit's elements into its unit's row of a zero ``[units, k]`` buffer;
    one all-reduce sums the replicas of every unit at once.
    """
    tp = group.size
    window = slice(flat_start, flat_start + grad.numel())
    for seg, mask in shard.replicated_masks(local_shape, tp, grad.device):
        mask = mask[window]  # [n]
        mine = grad[mask]  # [k] this rank's elements of the segment inside the window
        buffer = mine.new_zeros((seg.units, mine.numel()))  # [units, k]
        unit = seg.first_unit(group.rank, tp)
        buffer[unit].copy_(mine)
        all_reduce(buffer, group)
        grad[mask] = buffer[unit]


@dataclass(frozen=True)
class ParamMeta:
    """Everything the runtime needs to know about one parameter.

    ``tp_shard``: how the full tensor is split over TP (None: replicated over TP).
    ``grad_partial_over_tp``: each TP rank's gradient is a partial sum (norm weights
    and row-parallel biases under sequence parallelism), all-reduced over TP.
    ``shared_across_stages``: tied word embeddings held by the first and the last
    pipeline stage; the gradients are summed over the embedding group.
    ``excluded_from_grad_norm``: the last stage's copy of those embeddings, left out
    of the gradient norm (its twin on the first stage is counted); likewise every copy but
    one of a shared block (``replicated_over_pipeline``).
    ``replicated_over_pipeline``: a parameter of a shared block of 'Z' layers (Zamba), held
    by every chunk whose layers run it; the copies' gradients are summed (``sum_shared_block_grads``).
    ``init_method``: 'normal', 'scaled_normal' (output layers), 'ones', 'zeros', 'constant' (every
    element ``init_value``: xIELU's alphas) or one of the Mamba mixer's (``core.transformer.mamba_mixer.MAMBA_INITS``);
    ``init_name``: the parameter name whose draws it takes (None: its own);
    ``init_shape``: the unpadded full shape to draw (the rest is zero padding).
    ``is_expert``: an expert parameter, replicated over the expert-DP group only.
    ``num_global_experts``: for an expert parameter whose leading dimension counts this EP rank's
    experts, the experts of the whole layer (EP rank ``r`` holds ``[r * local, (r + 1) * local)``).
    ``distinct_over_tp``: not split over TP yet different on every TP rank (whole experts spread over
    TP x EP, ``--expert-tensor-parallel-size 1``): each rank's value counts in the gradient norm.
    """

    tp_shard: Optional[TPShard] = None
    grad_partial_over_tp: bool = False
    shared_across_stages: bool = False
    excluded_from_grad_norm: bool = False
    replicated_over_pipeline: bool = False
    init_method: str = "normal"
    init_name: Optional[str] = None
    init_shape: Optional[Tuple[int, ...]] = None
    is_expert: bool = False
    init_value: float = 0.0
    num_global_experts: Optional[int] = None
    distinct_over_tp: bool = False

    def replace(self, **changes: object) -> "ParamMeta":
        return dataclasses.replace(self, **changes)


_DEFAULT_META = ParamMeta()


def param_meta(param: torch.Tensor) -> ParamMeta:
    """The parameter's metadata, or the default record when nothing set it."""
    return getattr(param, META_ATTRIBUTE, _DEFAULT_META)


def set_meta(param: torch.Tensor, meta: ParamMeta) -> torch.Tensor:
    setattr(param, META_ATTRIBUTE, meta)
    return param


def update_meta(param: torch.Tensor, **changes: object) -> torch.Tensor:
    """Replace some fields of the parameter's metadata."""
    return set_meta(param, param_meta(param).replace(**changes))


def copy_meta(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Give ``target`` (a master copy, a re-allocated or FSDP-wrapped parameter) the metadata of ``source``."""
    if hasattr(source, META_ATTRIBUTE):
        set_meta(target, param_meta(source))
    return target


def full_shape(param: torch.Tensor) -> List[int]:
    """The unsharded shape of a (TP- and EP-local) parameter."""
    meta = param_meta(param)
    shape = meta.tp_shard.full_shape(param.shape) if meta.tp_shard is not None else list(param.shape)
    if meta.num_global_experts is not None:
        shape[0] = meta.num_global_experts
    return shape


def expert_slice(full: torch.Tensor, ep_rank: int, ep: int) -> torch.Tensor:
    """EP rank ``ep_rank``'s experts of an expert tensor ``full`` [experts, ...] (a view)."""
    local = full.shape[0] // ep
    return full.narrow(0, ep_rank * local, local)


def local_tensor(full: torch.Tensor, meta: ParamMeta, tp_rank: int, tp: int, ep_rank: int = 0,
                 ep: int = 1) -> torch.Tensor:
    """This rank's piece of a full tensor: its experts (EP), then its TP slice."""
    if meta.num_global_experts is not None:
        full = expert_slice(full, ep_rank, ep)
    return meta.tp_shard.shard(full, tp_rank, tp) if meta.tp_shard is not None else full


def data_parallel_group(param: torch.Tensor, state: "ParallelState") -> "Group":
    """The group a parameter is replicated over: expert-DP for experts, DP otherwise."""
    return state.group("expert_dp") if param_meta(param).is_expert else state.dp_group


def gather_full_tensor(local: torch.Tensor, shard: Optional[TPShard], group: "Group") -> torch.Tensor:
    """The full, TP-unsharded tensor from this rank's ``local`` slice (a value or a gradient), on every rank.

    ``shard`` is the tensor's spec (``param_meta(p).tp_shard``; None: replicated). Collective over the
    TP group; for checks, checkpoints and Muon's whole-matrix updates.
    """
    if shard is None or group.size == 1:
        return local.detach().clone()
    every_rank = all_gather_along_dim(local.detach().unsqueeze(0), 0, group)  # [tp, *local shape]
    return shard.unshard(list(every_rank.unbind(0)))
