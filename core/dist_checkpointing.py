"""Distributed checkpoints (``--ckpt-format torch_dist``) through ``torch.distributed.checkpoint`` (DCP).

Every tensor is stored once, as the *global* tensor the whole model holds (the
tensor ``tools/convert_ckpt.py`` calls full: every TP slice and every expert,
the vocabulary without its TP padding), under one key that no layout changes:
``model.<name>`` for weights, ``optimizer.<state>.<name>`` for the optimizer's
per-parameter state (``exp_avg``, ``exp_avg_sq`` and, in a bf16/fp16 run,
``fp32_param``). Layer numbers in names are already global (pipeline stages and
virtual chunks build their layers with their global numbers); the last stage's
copy of tied word embeddings is stored as the embedding itself.

A rank describes what it holds of each tensor as :class:`LocalPieces`: its
pieces and their offsets in the global tensor, derived from the parameter's
:class:`~core.tensor_parallel.param_meta.ParamMeta` (the TP segments of fused
QKV or gate/up, the EP rank's experts, the vocabulary padding to leave out).
DCP writes each piece once (replicas over DP, over TP for replicated
parameters and GQA key/value heads are deduplicated by their offsets) and, at
load, reads whatever stored pieces overlap the pieces the loading rank holds
at *its* layout: a checkpoint saved at TP2 x PP2 loads at TP4, TP1 x DP4 or
under FSDP2, with no conversion step (Megatron's resharding).

What is sharded over DP by flat ranges (the distributed optimizer's masters
and moments, FSDP2's row shards of weights and state) is never gathered: a
rank's range of a parameter is cut into boxes contiguous in memory
(:func:`flat_boxes`), each mapped to global offsets (:func:`window_pieces`),
and DCP writes those and reads into them in place.

The iteration directory holds DCP's files (``__<rank>_0.distcp``,
``.metadata``), ``common.pt`` (the run's arguments, scheduler, counters and the
optimizer's scalars, written by global rank 0) and ``metadata.json``
(``{"sharded_backend": "torch_dist"}``), as Megatron-LM lays it out; the
completion marker and the tracker follow as for the per-rank format.

``--async-save``: the pieces are copied to host memory in the step; DCP writes
them in a background thread (:class:`AsyncSaves`, at most one save in flight),
and the marker and tracker are written only once the write succeeded.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import warnings
from concurrent.futures import Future, wait as wait_for
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex, TensorProperties
from torch.distributed.checkpoint.planner import TensorWriteData, WriteItem, WriteItemType

from core.tensor_parallel.mappings import first_on_any_rank
from core.tensor_parallel.param_meta import ParamMeta

FORMAT = "torch_dist"
COMMON_FILENAME = "common.pt"
METADATA_FILENAME = "metadata.json"
DCP_METADATA_FILENAME = ".metadata"

# DCP warns, from whichever thread writes, that it runs in one process when there is no process group: intended
warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
MODEL_PREFIX = "model."
OPTIMIZER_PREFIX = "optimizer."


class DamagedCheckpoint(ValueError):
    """A checkpoint file that is missing, truncated or unreadable (the message names it)."""


def is_dist_checkpoint(directory: str) -> bool:
    """Whether an iteration directory holds a ``torch_dist`` checkpoint."""
    return os.path.isfile(os.path.join(directory, DCP_METADATA_FILENAME))


# ---------------------------------------------------------------------------- where a rank's pieces lie

Interval = Tuple[int, int, int]  # (local start, global start, length) along one dimension


@dataclass(frozen=True)
class PieceSpec:
    """One rectangular piece of a local tensor: ``local[local_offsets : +sizes]`` is
    ``global[global_offsets : +sizes]``."""

    local_offsets: Tuple[int, ...]
    global_offsets: Tuple[int, ...]
    sizes: Tuple[int, ...]

    def view(self, local: torch.Tensor) -> torch.Tensor:
        for dim, (start, size) in enumerate(zip(self.local_offsets, self.sizes)):
            local = local.narrow(dim, start, size)
        return local


def _tp_intervals(meta: ParamMeta, tp_rank: int, tp: int) -> List[Interval]:
    """Along the TP dimension: each segment's (local rows, global rows) for this TP rank."""
    shard = meta.tp_shard
    intervals, offset, local_offset = [], 0, 0
    for seg in shard.segments:
        rows = seg.local_units(tp) * seg.unit_size
        intervals.append((local_offset, offset + seg.first_unit(tp_rank, tp) * seg.unit_size, rows))
        offset, local_offset = offset + seg.size, local_offset + rows
    return intervals


def _clip(intervals: List[Interval], limit: int) -> List[Interval]:
    """Keep the parts of ``intervals`` below global index ``limit`` (the vocabulary without padding)."""
    kept = []
    for local, glob, length in intervals:
        length = min(length, limit - glob)
        if length > 0:
            kept.append((local, glob, length))
    return kept


def _dimension_intervals(local_shape: Sequence[int], meta: ParamMeta, tp_rank: int, tp: int,
                         ep_rank: int) -> Tuple[Tuple[int, ...], List[List[Interval]]]:
    """(global shape, per dimension the (local start, global start, length) runs this rank holds)."""
    dims: List[List[Interval]] = [[(0, 0, n)] for n in local_shape]
    global_shape = list(local_shape)
    if meta.num_global_experts is not None:  # this EP rank's experts lead the expert tensors
        dims[0] = [(0, ep_rank * local_shape[0], local_shape[0])]
        global_shape[0] = meta.num_global_experts
    if meta.tp_shard is not None:
        dims[meta.tp_shard.dim] = _tp_intervals(meta, tp_rank, tp)
        global_shape[meta.tp_shard.dim] = meta.tp_shard.full_size
    if meta.init_shape is not None:  # the unpadded shape: TP's vocabulary padding is not stored
        for dim, limit in enumerate(meta.init_shape):
            if limit < global_shape[dim]:
                dims[dim], global_shape[dim] = _clip(dims[dim], limit), limit
    return tuple(global_shape), dims


def _pieces_in(dims: List[List[Interval]], box: Sequence[Tuple[int, int]]) -> List[PieceSpec]:
    """The pieces of the local box ``[(start, length) per dimension]``: its intersection with each run."""
    per_dim = []
    for runs, (start, length) in zip(dims, box):
        kept = []
        for local, glob, size in runs:
            lo, hi = max(local, start), min(local + size, start + length)
            if lo < hi:
                kept.append((lo, glob + lo - local, hi - lo))
        per_dim.append(kept)
    return [PieceSpec(tuple(i[0] for i in combo), tuple(i[1] for i in combo), tuple(i[2] for i in combo))
            for combo in itertools.product(*per_dim)]


def global_layout(local_shape: Sequence[int], meta: ParamMeta, tp_rank: int, tp: int,
                  ep_rank: int) -> Tuple[Tuple[int, ...], List[PieceSpec]]:
    """(global shape, this rank's pieces) of a TP- and EP-local tensor of shape ``local_shape``."""
    global_shape, dims = _dimension_intervals(local_shape, meta, tp_rank, tp, ep_rank)
    return global_shape, _pieces_in(dims, [(0, n) for n in local_shape])


def flat_boxes(shape: Sequence[int], start: int, end: int) -> List[Tuple[int, List[Tuple[int, int]]]]:
    """The elements ``[start, end)`` of a row-major tensor of ``shape`` as boxes, each contiguous in the flat
    order: ``(flat offset of the box, [(start, length) per dimension])``. At most two per dimension."""
    if start >= end:
        return []
    if len(shape) <= 1:
        return [(start, [(start, end - start)] if shape else [])]
    inner = math.prod(shape[1:])
    first, first_offset = divmod(start, inner)
    last, last_offset = divmod(end, inner)
    if first == last:  # inside one row
        return [(first * inner + offset, [(first, 1)] + box) for offset, box in flat_boxes(shape[1:], first_offset,
                                                                                        last_offset)]
    boxes = []
    if first_offset:  # the end of a partial first row
        boxes += [(first * inner + offset, [(first, 1)] + box)
                  for offset, box in flat_boxes(shape[1:], first_offset, inner)]
        first += 1
    if first < last:  # whole rows
        boxes.append((first * inner, [(first, last - first)] + [(0, n) for n in shape[1:]]))
    if last_offset:  # the start of a partial last row
        boxes += [(last * inner + offset, [(last, 1)] + box) for offset, box in flat_boxes(shape[1:], 0, last_offset)]
    return boxes


def window_pieces(values: torch.Tensor, local_shape: Sequence[int], start: int, meta: ParamMeta, tp_rank: int,
                  tp: int, ep_rank: int) -> Tuple[Tuple[int, ...], List[Tuple[Tuple[int, ...], torch.Tensor]]]:
    """(global shape, ``(global offsets, view of values)`` pieces) of ``values``, the flat window
    ``[start, start + len)`` of a local tensor of ``local_shape`` (the distributed optimizer's share of a
    parameter): no rank gathers the whole tensor to save or load its part."""
    global_shape, dims = _dimension_intervals(local_shape, meta, tp_rank, tp, ep_rank)
    pieces = []
    for offset, box in flat_boxes(local_shape, start, start + values.numel()):
        block = values[offset - start:offset - start + math.prod(n for _, n in box)].view([n for _, n in box])
        for spec in _pieces_in(dims, box):
            view = block
            for dim, ((box_start, _), piece_start, size) in enumerate(zip(box, spec.local_offsets, spec.sizes)):
                view = view.narrow(dim, piece_start - box_start, size)
            pieces.append((spec.global_offsets, view))
    return global_shape, pieces


# ---------------------------------------------------------------------------- DCP's view of the pieces

class LocalPieces:
    """This rank's pieces of one global tensor, in DCP's checkpointable protocol (the one ``DTensor``
    implements): DCP asks it for its write items, its chunks and the tensor of one chunk."""

    def __init__(self, global_shape: Sequence[int], pieces: Sequence[Tuple[Tuple[int, ...], torch.Tensor]]) -> None:
        self.global_shape = torch.Size(global_shape)
        self.pieces = {torch.Size(offsets): tensor for offsets, tensor in pieces}

    def size(self) -> torch.Size:
        return self.global_shape

    def __create_write_items__(self, fqn: str, _object: Any) -> List[WriteItem]:
        return [WriteItem(index=MetadataIndex(fqn, offsets), type=WriteItemType.SHARD,
                          tensor_data=TensorWriteData(chunk=ChunkStorageMetadata(offsets, tensor.shape),
                                                      properties=TensorProperties.create_from_tensor(tensor),
                                                      size=self.global_shape))
                for offsets, tensor in self.pieces.items()]

    def __create_chunk_list__(self) -> List[ChunkStorageMetadata]:
        return [ChunkStorageMetadata(offsets, tensor.shape) for offsets, tensor in self.pieces.items()]

    def __get_tensor_shard__(self, index: MetadataIndex) -> torch.Tensor:
        return self.pieces[torch.Size(index.offset)]


def _lookup(state_dict: Dict[str, Any], index: MetadataIndex) -> Any:
    value = state_dict[index.fqn]
    return value.__get_tensor_shard__(index) if isinstance(value, LocalPieces) else None


class _SavePlanner(dcp.DefaultSavePlanner):
    """DCP's planner, finding the tensor of a :class:`LocalPieces` chunk (DCP looks only into tensors)."""

    def lookup_object(self, index: MetadataIndex) -> Any:
        found = _lookup(self.state_dict, index)
        return found if found is not None else super().lookup_object(index)


class _LoadPlanner(dcp.DefaultLoadPlanner):
    """DCP's planner for a flat state dict of :class:`LocalPieces` (whose preparation step would drop them)."""

    def __init__(self) -> None:
        super().__init__(flatten_state_dict=False, flatten_sharded_tensors=False)

    def set_up_planner(self, state_dict: Dict[str, Any], metadata: Any = None, is_coordinator: bool = False) -> None:
        self.original_state_dict = self.state_dict = state_dict
        self.metadata, self.is_coordinator = metadata, is_coordinator

    def lookup_tensor(self, index: MetadataIndex) -> torch.Tensor:
        found = _lookup(self.state_dict, index)
        return found if found is not None else super().lookup_tensor(index)


class HostBuffers:
    """Host memory for the pieces of an asynchronous save, kept from one save to the next (the previous save
    is written before the next copies in): a save copies into memory that is already mapped."""

    def __init__(self) -> None:
        self.buffers: Dict[Tuple[str, Tuple[int, ...]], torch.Tensor] = {}

    def copy(self, key: str, offsets: Tuple[int, ...], value: torch.Tensor) -> torch.Tensor:
        buffer = self.buffers.get((key, offsets))
        if buffer is None or buffer.shape != value.shape or buffer.dtype != value.dtype:
            buffer = self.buffers[(key, offsets)] = torch.empty(value.shape, dtype=value.dtype)
        return buffer.copy_(value)


def _staged(key: str, pieces: Sequence[Tuple[Tuple[int, ...], torch.Tensor]], global_shape: Sequence[int],
            host: Optional[HostBuffers]) -> LocalPieces:
    """The pieces to write: host copies in ``host`` (an asynchronous save: training changes the tensors while
    they are written), else the tensors' own memory where it is on the host and contiguous."""
    return LocalPieces(global_shape, [(offsets, host.copy(key, offsets, view) if host is not None
                                       else view.to("cpu").contiguous()) for offsets, view in pieces])


def whole_pieces(key: str, tensor: torch.Tensor, host: Optional[HostBuffers] = None) -> LocalPieces:
    """A tensor that every rank holding it holds whole and alike (a transform's state), staged as
    :func:`_staged`; DCP writes it once."""
    return _staged(key, [((0,) * tensor.dim(), tensor.detach())], tensor.shape, host)


def pieces_for_save(key: str, local: torch.Tensor, meta: ParamMeta, tp_rank: int, tp: int, ep_rank: int,
                    host: Optional[HostBuffers] = None) -> LocalPieces:
    """This rank's pieces of ``local``, staged as :func:`_staged`."""
    shape, specs = global_layout(local.shape, meta, tp_rank, tp, ep_rank)
    return _staged(key, [(spec.global_offsets, spec.view(local.detach())) for spec in specs], shape, host)


@dataclass
class LoadTarget:
    """A local tensor to fill from a checkpoint, and its pieces DCP reads into (views of it)."""

    local: torch.Tensor
    pieces: LocalPieces


def load_target(local_shape: Sequence[int], dtype: torch.dtype, meta: ParamMeta, tp_rank: int, tp: int,
                ep_rank: int) -> LoadTarget:
    """A local tensor whose pieces DCP fills in place (what no piece covers, the vocabulary's TP padding,
    is zero)."""
    shape, specs = global_layout(local_shape, meta, tp_rank, tp, ep_rank)
    covered = sum(math.prod(spec.sizes) for spec in specs) == math.prod(local_shape)
    local = (torch.empty if covered else torch.zeros)(local_shape, dtype=dtype)
    return LoadTarget(local, LocalPieces(shape, [(spec.global_offsets, spec.view(local)) for spec in specs]))


# ---------------------------------------------------------------------------- saving and loading

_PROCESS_GROUP: Dict[str, Any] = {}


def checkpoint_group() -> Optional[Any]:
    """A gloo group over every rank for DCP's planning collectives (a background write must not share the
    training's communicator); None without a process group. Collective on first use."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    if "group" not in _PROCESS_GROUP:
        _PROCESS_GROUP["group"] = dist.new_group(backend="gloo")
    return _PROCESS_GROUP["group"]


def forget_checkpoint_group() -> None:
    """Drop the cached group (its process group is being destroyed)."""
    _PROCESS_GROUP.clear()


def write_common(directory: str, common: Dict[str, Any], save: Callable[[Any, str], None]) -> None:
    """Rank 0's ``common.pt`` and ``metadata.json`` beside DCP's files."""
    save(common, os.path.join(directory, COMMON_FILENAME))
    with open(os.path.join(directory, METADATA_FILENAME), "w") as handle:
        json.dump({"sharded_backend": FORMAT, "sharded_backend_version": 1}, handle)


def save(directory: str, state: Dict[str, Any]) -> None:
    """Write ``state`` (keys -> :class:`LocalPieces` or picklable objects) with DCP; collective."""
    os.makedirs(directory, exist_ok=True)
    group = checkpoint_group()
    dcp.save(state, checkpoint_id=directory, planner=_SavePlanner(), process_group=group, no_dist=group is None)


class _Staged:
    """The stager for :func:`dcp.async_save`: the pieces are host copies already (:func:`pieces_for_save`)."""

    should_synchronize_after_execute = False

    def stage(self, state_dict: Dict[str, Any]) -> Dict[str, Any]:
        return state_dict

    def synchronize_staging(self) -> None:
        pass

    def close(self) -> None:
        pass


def save_in_background(directory: str, state: Dict[str, Any]) -> Future:
    """Start writing ``state`` in a background thread; the future fails when any rank's write fails."""
    os.makedirs(directory, exist_ok=True)
    group = checkpoint_group()
    result = dcp.async_save(state, checkpoint_id=directory, planner=_SavePlanner(), process_group=group,
                            async_stager=_Staged(), no_dist=group is None)
    return getattr(result, "upload_completion", result)


def load(directory: str, state: Dict[str, Any], metadata: Optional[Any] = None) -> None:
    """Fill ``state`` (keys -> :class:`LocalPieces` to read into) from the checkpoint in ``directory``
    (``metadata``: its :func:`read_metadata`, when the caller has it); collective. Raises, on every rank (all
    ranks agree first, so none waits in DCP for one that gave up), DamagedCheckpoint naming a missing or
    truncated file, KeyError naming a key the checkpoint lacks, or ValueError naming a tensor whose shape
    differs."""
    group = checkpoint_group()
    metadata = metadata if metadata is not None else read_metadata(directory)
    stored = stored_keys(metadata)
    damage = damaged_file(directory, metadata)
    problem = ("damaged", damage) if damage is not None else None
    for key, value in state.items() if problem is None else ():
        if key not in stored:
            problem = ("missing", key)
            break
        if isinstance(value, LocalPieces) and stored[key] is not None and stored[key] != tuple(value.global_shape):
            name = key[len(MODEL_PREFIX):] if key.startswith(MODEL_PREFIX) else key
            problem = ("shape", f"tensor {name} has shape {stored[key]} in the checkpoint and "
                                f"{tuple(value.global_shape)} in this model")
            break
    problem = first_on_any_rank(problem, group)
    if problem is not None:
        kind = {"missing": KeyError, "damaged": DamagedCheckpoint}.get(problem[0], ValueError)
        raise kind(problem[1])
    dcp.load(state, checkpoint_id=directory, planner=_LoadPlanner(), process_group=group, no_dist=group is None)


def read_metadata(directory: str) -> Any:
    """DCP's ``.metadata`` of ``directory``; DamagedCheckpoint naming the file when it cannot be read."""
    path = os.path.join(directory, DCP_METADATA_FILENAME)
    try:
        return dcp.FileSystemReader(directory).read_metadata()
    except Exception as error:  # a truncated or overwritten pickle raises anything from EOFError to KeyError
        raise DamagedCheckpoint(f"{path} cannot be read ({type(error).__name__}: {str(error)[:200]})") from None


def damaged_file(directory: str, metadata: Any) -> Optional[str]:
    """Why a data file of the checkpoint cannot hold what its ``metadata`` says it does (None: all there).
    Checks sizes only: it finds missing and truncated files, not altered bytes."""
    needed: Dict[str, int] = {}
    for info in metadata.storage_data.values():
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), info.offset + info.length)
    for name, end in sorted(needed.items()):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            return f"{path} is missing"
        if os.path.getsize(path) < end:
            return f"{path} is truncated ({os.path.getsize(path)} bytes; the checkpoint's metadata needs {end})"
    return None


def stored_keys(metadata: Any) -> Dict[str, Optional[Tuple[int, ...]]]:
    """Every key of a checkpoint (its :func:`read_metadata`) and its global shape (None: an object)."""
    return {key: (tuple(md.size) if hasattr(md, "size") else None)
            for key, md in metadata.state_dict_metadata.items()}


def read_full(directory: str, keys: Sequence[str], metadata: Any) -> Dict[str, torch.Tensor]:
    """Whole global tensors of ``keys`` in one process (the converter's view of a checkpoint; ``metadata``:
    its :func:`read_metadata`)."""
    shapes = metadata.state_dict_metadata
    state = {key: torch.empty(tuple(shapes[key].size), dtype=shapes[key].properties.dtype) for key in keys}
    dcp.load(state, checkpoint_id=directory, no_dist=True)
    return state


# ---------------------------------------------------------------------------- a rank's model and optimizer

TIED_OUTPUT_WEIGHT = "output_layer.weight"
EMBEDDING_WEIGHT = "embedding.word_embeddings.weight"
FP32_PARAM = "fp32_param"


@dataclass(frozen=True)
class RankCoordinates:
    """Where a rank sits: its TP rank and size, and its EP rank (which experts it holds)."""

    tp_rank: int
    tp: int
    ep_rank: int


def checkpoint_key(prefix: str, name: str, tied: bool) -> str:
    """The layout-independent key of a tensor (the last stage's copy of tied embeddings is the embedding)."""
    return prefix + (EMBEDDING_WEIGHT if tied and name == TIED_OUTPUT_WEIGHT else name)


def optimizer_prefix(kind: str) -> str:
    return f"{OPTIMIZER_PREFIX}{kind}."


def state_to_save(dp: Any, where: RankCoordinates, tied: bool, with_optimizer: bool,
                  host: Optional[HostBuffers] = None) -> Tuple[Dict[str, Any], List[str]]:
    """(``{key: LocalPieces}`` of the model and, ``with_optimizer``, the optimizer's per-parameter state;
    the optimizer state kinds). ``host``: copy the pieces there (an asynchronous save). What is sharded by
    flat ranges (FSDP2's parameters and state, the distributed optimizer's state) each rank writes from its
    own share; the rest is whole on each rank (FSDP1 gathers it over DP: collective)."""
    specs = dp.local_tensors()
    state: Dict[str, Any] = {}

    def add_windows(prefix_of: Callable[[str], str], windows: List[Any]) -> set:
        kinds = set()
        for name, shape, start, entries in windows:
            for kind, flat in entries.items():
                key = checkpoint_key(prefix_of(kind), name, tied)
                global_shape, pieces = window_pieces(flat.detach(), shape, start, specs[name].meta, *_coords(where))
                state[key] = _staged(key, pieces, global_shape, host)
                kinds.add(kind)
        return kinds

    for name, tensor in dp.named_weights().items():
        key = checkpoint_key(MODEL_PREFIX, name, tied)
        state[key] = pieces_for_save(key, tensor, specs[name].meta, *_coords(where), host=host)
    if dp.windowed_model:
        add_windows(lambda kind: MODEL_PREFIX, dp.model_windows())
    kinds: set = set()
    if with_optimizer and dp.windowed_optimizer:
        kinds = add_windows(optimizer_prefix, dp.optimizer_windows())
    elif with_optimizer:
        for name, entries in dp.named_optimizer_states().items():
            for kind, tensor in entries.items():
                key = checkpoint_key(optimizer_prefix(kind), name, tied)
                state[key] = pieces_for_save(key, tensor, specs[name].meta, *_coords(where), host=host)
                kinds.add(kind)
    return state, sorted(kinds)


def _coords(where: RankCoordinates) -> Tuple[int, int, int]:
    return where.tp_rank, where.tp, where.ep_rank


class _Request:
    """The targets of one load: each key read once, copied to every local name that maps to it."""

    def __init__(self, where: RankCoordinates) -> None:
        self.where = where
        self.targets: Dict[str, LoadTarget] = {}
        self.names: Dict[Tuple[str, str], str] = {}  # (part, local name) -> key

    def add(self, part: str, name: str, key: str, shape: Sequence[int], dtype: torch.dtype, meta: ParamMeta) -> None:
        if key not in self.targets:
            self.targets[key] = load_target(shape, dtype, meta, *_coords(self.where))
        self.names[(part, name)] = key

    def state(self) -> Dict[str, Any]:
        return {key: target.pieces for key, target in self.targets.items()}

    def results(self, part: str) -> Dict[str, torch.Tensor]:
        """The tensors of ``part`` by local name (a copy where one key fills several names)."""
        uses: Dict[str, int] = {}
        for key in self.names.values():
            uses[key] = uses.get(key, 0) + 1
        return {name: self.targets[key].local.clone() if uses[key] > 1 else self.targets[key].local
                for (which, name), key in self.names.items() if which == part}


def load_into(directory: str, dp: Any, where: RankCoordinates, tied: bool, kinds: Optional[Sequence[str]],
              metadata: Any) -> Tuple[Dict[str, torch.Tensor], Dict[str, Dict[str, torch.Tensor]]]:
    """Read this rank's part of every tensor: (weights by name, optimizer states by parameter name).
    Shares sharded by flat ranges are read in place instead (``dp.windowed_model``: the weights hold only the
    buffers, finish with ``dp.finish_model_windows``; ``dp.windowed_optimizer``: no states, finish with
    ``dp.finish_optimizer_windows``). ``kinds``: the optimizer state kinds the checkpoint holds (None: read
    none). fp32 weights come from the stored fp32 master weights when the checkpoint has them (a bf16 run's),
    so nothing is lost to bf16 rounding. ``metadata``: the checkpoint's :func:`read_metadata`. Collective."""
    stored = stored_keys(metadata)
    request = _Request(where)
    specs = dp.local_tensors()
    in_place: List[Tuple[str, Any]] = []  # (key prefix of a kind, window) filled in place
    if dp.windowed_model:
        in_place += [(MODEL_PREFIX, w) for w in dp.model_window_targets()]
    if kinds is not None and dp.windowed_optimizer:
        in_place += [(OPTIMIZER_PREFIX, w) for w in dp.optimizer_window_targets(list(kinds))]
    windowed = {name for prefix, (name, _, _, _) in in_place if prefix == MODEL_PREFIX}
    for name, spec in specs.items():
        if name not in windowed:
            master = checkpoint_key(optimizer_prefix(FP32_PARAM), name, tied)
            key = (master if spec.dtype == torch.float32 and master in stored
                   else checkpoint_key(MODEL_PREFIX, name, tied))
            request.add("model", name, key, spec.shape, spec.dtype, spec.meta)
        for kind in (kinds or []) if spec.trains and not dp.windowed_optimizer else []:
            key = checkpoint_key(optimizer_prefix(kind), name, tied)
            if key in stored:  # masters only from a bf16/fp16 run; each parameter has its own optimizer's moments
                request.add(kind, name, key, spec.shape, torch.float32, spec.meta)
    state = request.state()
    for prefix, (name, shape, start, entries) in in_place:
        for kind, flat in entries.items():
            key = _window_key(prefix, kind, name, tied, stored, flat.dtype)
            global_shape, pieces = window_pieces(flat, shape, start, specs[name].meta, *_coords(where))
            state[key] = LocalPieces(global_shape, pieces)
    load(directory, state, metadata)
    weights = request.results("model")
    states: Dict[str, Dict[str, torch.Tensor]] = {}
    for kind in kinds or []:
        for name, value in request.results(kind).items():
            states.setdefault(name, {})[kind] = value
    return weights, states


def _window_key(prefix: str, kind: str, name: str, tied: bool, stored: Dict[str, Any], dtype: torch.dtype) -> str:
    """The key a share is read from: an fp32 model share from the fp32 masters when the checkpoint has them."""
    if prefix == MODEL_PREFIX:
        master = checkpoint_key(optimizer_prefix(FP32_PARAM), name, tied)
        return master if dtype == torch.float32 and master in stored else checkpoint_key(MODEL_PREFIX, name, tied)
    return checkpoint_key(optimizer_prefix(kind), name, tied)


def bytes_pieces(payload: bytes) -> LocalPieces:
    """A rank-private object (its RNG states) as a uint8 tensor, so that each rank writes its own."""
    return LocalPieces((len(payload),), [((0,), torch.frombuffer(bytearray(payload), dtype=torch.uint8))])


def read_bytes(directory: str, key: str, metadata: Any) -> Optional[bytes]:
    """The bytes stored by :func:`bytes_pieces` under ``key`` (None: absent; ``metadata``: the checkpoint's
    :func:`read_metadata`). Collective."""
    size = stored_keys(metadata).get(key)
    target = LocalPieces(size or (0,), [((0,), torch.empty(size or (0,), dtype=torch.uint8))])
    load(directory, {key: target} if size is not None else {}, metadata)
    return bytes(target.pieces[torch.Size([0])].numpy().tobytes()) if size is not None else None


class AsyncSaves:
    """At most one background save in flight; its ``publish`` (marker, tracker) runs once it succeeded."""

    def __init__(self) -> None:
        self.host = HostBuffers()  # reused by every save: the previous one is written before the next copies
        self.future: Optional[Future] = None
        self.iteration = -1
        self.publish: Callable[[], None] = lambda: None

    def start(self, future: Future, iteration: int, publish: Callable[[], None]) -> None:
        self.wait()
        self.future, self.iteration, self.publish = future, iteration, publish

    def poll(self) -> None:
        """Publish a save that has finished (at an iteration boundary; never blocks)."""
        if self.future is not None and self.future.done():
            self._finish()

    def wait(self) -> None:
        """Block until the save in flight (if any) is written, then publish it."""
        if self.future is not None:
            wait_for([self.future])  # its failure (DCP's CheckpointException is a BaseException) goes to _finish
            self._finish()

    def _finish(self) -> None:
        future, self.future = self.future, None
        error = future.exception()
        if error is None:
            self.publish()
            return
        print(f"error: the background save of iteration {self.iteration} failed ({error_line(error)}); the "
              "tracker still names the previous checkpoint", flush=True)


def error_line(error: BaseException) -> str:
    """``Type: message`` of an error, with only the last line of a long message (DCP's CheckpointException
    lists every rank's traceback; its last line is the cause)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1].strip()[:300] if lines else ''}"
