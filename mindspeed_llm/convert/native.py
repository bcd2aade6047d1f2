"""Our sharded checkpoint (``mg``): ``release/mp_rank_TT[_PPP][_EEE]/model_optim_rng.pt`` per TP, PP and EP
rank, with ``args``, ``transformer_config`` and ``hf_config``, the tracker last.

:class:`MegatronSource` reads full tensors from the rank files (memory-mapped, one piece at a time) and
:class:`MegatronSink` slices each full tensor over the target ranks and streams it into their files.
"""
from __future__ import annotations

import argparse
import ctypes
import math
import mmap
import os
import re
import threading
import zipfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from core.checkpointing import (CHECKPOINT_FILENAME, CHECKPOINT_VERSION, COMPLETE_MARKER, TRACKER_FILENAME,
                                CheckpointError, StreamingCheckpoint, checkpoint_file, iteration_dir,
                                latest_iteration, map_file, map_foreign_file, model_keys, namespace_for_checkpoint,
                                non_finite_count, write_tracker)
from core.pipeline_parallel.layout import LayoutError, Placement, stage_layers
from core.tensor_parallel.param_meta import TPShard, expert_slice
from core.transformer.config import TransformerConfig
from mindspeed_llm.convert.errors import ConversionError, check_shape
from mindspeed_llm.convert.files import ITERATION_DIR
from mindspeed_llm.convert.hf import resolve_family
from mindspeed_llm.convert.layout import Location, ModelLayout
from mindspeed_llm.models.registry import to_hf, to_ours

def source_iteration(load_dir: str) -> Tuple[int, bool]:
    """(iteration, is release) of the checkpoint in ``load_dir``: the tracker's, else (a training run's --save
    whose tracker is gone) the newest iteration with its completion marker, as training's --load finds it."""
    tracker = latest_iteration(load_dir)  # (a lost tracker: the newest complete iteration, with a warning)
    if tracker is None:
        started = [n for n in sorted(os.listdir(load_dir)) if ITERATION_DIR.fullmatch(n)]
        if started:
            raise ConversionError(f"--load-dir {load_dir} has no {TRACKER_FILENAME} and none of its {len(started)} "
                                  f"iteration directories (the newest: {started[-1]}) is complete (no "
                                  f"{COMPLETE_MARKER}: saves that did not finish); convert a complete checkpoint")
        raise ConversionError(f"--load-dir {load_dir} has no {TRACKER_FILENAME}: not a Megatron checkpoint "
                              "(for a Hugging Face directory pass --load-model-type hf)")
    directory = iteration_dir(load_dir, tracker[0], tracker[1])
    if not os.path.isdir(directory):
        raise ConversionError(f"--load-dir {load_dir}: its {TRACKER_FILENAME} names "
                              f"{'release' if tracker[1] else f'iteration {tracker[0]}'}, but {directory} does not "
                              "exist; fix the tracker to name a saved iteration, or copy the complete checkpoint")
    return tracker


class MegatronSource:
    """Reads every (TP rank, pipeline stage) file; yields full tensors in the HF canonical form.

    The layout (TP, PP, virtual chunks, ``--num-layer-list``, noop layers) comes
    from the checkpoint's ``args`` and ``transformer_config``; the directory names
    and the ``model``/``model0..`` keys must agree with it. Files are memory-mapped
    (``torch.load(mmap=True)``) once: opening them reads names and shapes only, and a
    read copies each rank's piece into the full tensor and drops the piece's pages
    from memory (:func:`release_pages`), so resident memory stays at one full tensor.
    """

    overlay: Optional[Callable[[str, torch.Tensor], torch.Tensor]] = None  # (our name, full tensor) -> tensor read
    # names the overlay supplies whole, absent from the files (a LoRA reward model's value head over a plain LM)
    supplied: frozenset = frozenset()

    def __init__(self, load_dir: str, family_name: Optional[str], found: Optional[Tuple[int, bool]] = None) -> None:
        self.load_dir = load_dir
        self._mapped: Dict[Tuple[int, int], Dict[str, Any]] = {}  # (rank, stage) -> its file, memory-mapped
        self._file_backed: set = set()  # the (rank, stage) files that are memory-mapped, not read whole
        self._mapping = threading.Lock()  # reads run on worker threads
        self.iteration, self.release = found or source_iteration(load_dir)
        self.pp, self.ep = self._pipeline_and_expert_sizes()
        self._reject_distributed_format()
        first = self._map_first()
        args = first.get("args") or argparse.Namespace()
        self.tp = int(getattr(args, "tensor_model_parallel_size", 1) or 1)
        self.config = self._config(first, args, load_dir)
        self.placement = self._placement(first, args)
        self.hf_config = first.get("hf_config")
        self.family = resolve_family(family_name or getattr(args, "model_type_hf", None), self.hf_config,
                                     self.path(0, 0))
        self.family_name = self.family.name
        # shapes[(rank, pp_rank, chunk)] -> that chunk's parameter shapes; rank = ep_rank * tp + tp_rank
        self.shapes: Dict[Tuple[int, int, int], Dict[str, Tuple[int, ...]]] = {}
        self._keep(first, 0, 0)
        del first
        for pp_rank in range(self.pp):
            for rank in range(self.tp * self.ep):
                if (rank, pp_rank) != (0, 0):
                    self._keep(self._map(rank, pp_rank), rank, pp_rank)

    def path(self, rank: int, pp_rank: int) -> str:
        """The file of ``rank`` (``ep_rank * tp + tp_rank``; the TP rank before EP is known) on stage ``pp_rank``."""
        tp = getattr(self, "tp", 1)
        return checkpoint_file(self.load_dir, self.iteration, rank % tp, pp_rank, self.pp, release=self.release,
                               ep_rank=rank // tp, ep_size=self.ep)

    def _pipeline_and_expert_sizes(self) -> Tuple[int, int]:
        """(PP, EP) from the rank directories ``mp_rank_TT[_PPP][_EEE]``; a two-number name is a stage unless
        the checkpoint's args give EP > 1 and PP 1 (Megatron names them alike)."""
        root = iteration_dir(self.load_dir, self.iteration, self.release)
        names = os.listdir(root) if os.path.isdir(root) else []
        parsed = [tuple(int(n) for n in m.groups() if n is not None)
                  for m in (re.fullmatch(r"mp_rank_00(?:_(\d{3}))?(?:_(\d{3}))?", n) for n in names) if m]
        if not parsed or max(len(p) for p in parsed) == 0:
            return 1, 1
        if max(len(p) for p in parsed) == 2:
            return max(p[0] for p in parsed) + 1, max(p[1] for p in parsed) + 1
        count = max(p[0] for p in parsed) + 1
        first = os.path.join(root, sorted(n for n in names if n.startswith("mp_rank_00_"))[0], CHECKPOINT_FILENAME)
        args = map_foreign_file(first).get("args") if os.path.isfile(first) else None
        ep = int(getattr(args, "expert_model_parallel_size", 1) or 1)
        pp = int(getattr(args, "pipeline_model_parallel_size", 1) or 1)
        return (1, count) if ep > 1 and pp == 1 else (count, 1)

    def _reject_distributed_format(self) -> None:
        """Megatron-LM's distributed format (``--ckpt-format torch_dist``: ``*.distcp`` files, no rank
        directories) is not read; say how to get the per-rank one."""
        directory = os.path.dirname(os.path.dirname(self.path(0, 0)))
        names = os.listdir(directory) if os.path.isdir(directory) else []
        if not any(n.startswith("mp_rank_") for n in names) and any(n.endswith(".distcp") for n in names):
            raise ConversionError(f"{directory} is a distributed checkpoint (--ckpt-format torch_dist, *.distcp "
                                  "files); re-save it in the per-rank format with Megatron-LM's --ckpt-format torch "
                                  "(or --ckpt-convert-format torch) and convert that")

    def _map_first(self) -> Dict[str, Any]:
        """The first rank file, read so that one written by another program (Megatron's numpy RNG states,
        enums) opens and is told apart by its keys instead of failing to unpickle."""
        try:
            return map_foreign_file(self.path(0, 0))
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _map(self, rank: int, pp_rank: int) -> Dict[str, Any]:
        """One rank file, memory-mapped at its first use and kept (its pages are dropped as they are read)."""
        with self._mapping:
            if (rank, pp_rank) not in self._mapped:
                path = self.path(rank, pp_rank)
                self._mapped[(rank, pp_rank)] = self._load(path)
                if zipfile.is_zipfile(path):  # torch's zip format: mapped (another is read whole)
                    self._file_backed.add((rank, pp_rank))
            return self._mapped[(rank, pp_rank)]

    def _load(self, path: str) -> Dict[str, Any]:
        """One rank file, memory-mapped (read whole when it is not in torch's zip format)."""
        try:
            return map_file(path)
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _keep(self, checkpoint: Dict[str, Any], tp_rank: int, pp_rank: int) -> None:
        keys = model_keys(checkpoint)
        expected = ["model"] if len(self.placement[0]) == 1 else [f"model{c}" for c in range(len(self.placement[0]))]
        if keys != expected:
            found = ", ".join(keys) or "no model state dict"
            raise ConversionError(f"{self.path(tp_rank, pp_rank)} holds {found}, expected {', '.join(expected)} "
                                  "for its virtual pipeline size; the checkpoint is incomplete or inconsistent")
        for chunk, key in enumerate(keys):
            if not isinstance(checkpoint[key], dict):
                raise ConversionError(f"{self.path(tp_rank, pp_rank)}: {key!r} is not a state dict")
            self.shapes[(tp_rank, pp_rank, chunk)] = {
                name: tuple(t.shape) for name, t in self._our_names(checkpoint[key], pp_rank, chunk).items()}

    def _our_names(self, state: Dict[str, Any], stage: int, chunk: int) -> Dict[str, Any]:
        """A chunk's state dict under our parameter names (ours: as stored)."""
        return state

    def _ranks_holding(self, shard: Optional[TPShard], expert: bool, layout: ModelLayout) -> List[int]:
        """The files (``ep_rank * tp + tp_rank``) whose pieces make a tensor: one copy of what is replicated over
        TP (rank 0's) or EP, every TP rank of a split tensor, every EP rank (and TP rank, for whole experts) of
        an expert tensor."""
        tps = range(self.tp if shard is not None or (expert and layout.whole_experts) else 1)
        eps = range(self.ep if expert else 1)
        return [ep_rank * self.tp + tp_rank for ep_rank in eps for tp_rank in tps]

    def _stored_name(self, stage: int, chunk: int, local: str) -> str:
        """The key in the file of our parameter ``local`` of chunk ``chunk`` on ``stage`` (ours: the same)."""
        return local

    def _stored_piece(self, state: Dict[str, Any], stage: int, chunk: int, local: str) -> torch.Tensor:
        """One rank's stored piece of our parameter ``local`` from that rank's chunk ``state`` (ours: the entry
        itself; a format that fuses several of ours into one entry gives its part)."""
        return state[self._stored_name(stage, chunk, local)]

    def _place(self, name: str, shard: TPShard, piece: torch.Tensor, rank: int, full: torch.Tensor) -> None:
        """Copy TP rank ``rank``'s piece of parameter ``name`` into its place in the full tensor."""
        shard.place(piece, rank, self.tp, full)

    def _stored_shard(self, name: str, layout: ModelLayout) -> Optional[TPShard]:
        """How the files split our parameter ``name`` over TP (ours: as our model does)."""
        return layout.shards[name]

    def _to_our_layout(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """The full tensor as our model lays it out (ours: as stored)."""
        return full

    def _config(self, first: Dict[str, Any], args: argparse.Namespace, load_dir: str) -> TransformerConfig:
        saved_pp = int(getattr(args, "pipeline_model_parallel_size", self.pp) or 1)
        if saved_pp != self.pp:
            raise ConversionError(f"{load_dir}: args say pipeline_model_parallel_size {saved_pp}, the rank "
                                  f"directories give {self.pp}; the checkpoint is incomplete or inconsistent")
        if not isinstance(first.get("transformer_config"), dict):
            raise ConversionError(f"{self.path(0, 0)} stores no transformer_config: it was not written by this "
                                  "suite; for a checkpoint of Megatron-LM or MindSpeed-LLM pass --load-model-type "
                                  "megatron")
        values = dict(first["transformer_config"])
        if "noop_layers" not in values:
            values["noop_layers"] = tuple(getattr(args, "noop_layers", None) or ())
        try:
            ep = int(getattr(args, "expert_model_parallel_size", None) or self.ep)  # files x TP with whole experts
            config = TransformerConfig.from_dict({**values, "tensor_model_parallel_size": self.tp,
                                                  "expert_model_parallel_size": ep})
        except (TypeError, ValueError) as error:
            raise ConversionError(f"{load_dir}: cannot rebuild the model config ({error})") from None
        return config

    def _placement(self, first: Dict[str, Any], args: argparse.Namespace) -> Placement:
        vpp = getattr(args, "virtual_pipeline_model_parallel_size", None) or len(model_keys(first)) or 1
        layer_list = getattr(args, "num_layer_list", None) or None
        try:
            return stage_layers(self.config.num_layers, self.pp, vpp if vpp > 1 else None, layer_list)
        except LayoutError as error:
            raise ConversionError(f"{self.load_dir}: its saved pipeline layout does not fit its model ({error})") \
                from None

    def check(self, layout: ModelLayout) -> None:
        for (tp_rank, pp_rank, chunk), state in self.shapes.items():
            path = self.path(tp_rank, pp_rank)
            expected = layout.chunk_names[pp_rank][chunk]
            for name in expected:
                if name not in state and name in self.supplied:
                    continue
                if name not in state:
                    raise ConversionError(f"parameter {name!r} needed by family {self.family_name} is missing from "
                                          f"{path} (chunk {chunk}); the checkpoint does not match its own "
                                          "transformer_config and pipeline layout")
                want = layout.local_shapes[(pp_rank, chunk, name)]
                if state[name] != want:
                    raise ConversionError(f"parameter {name!r} of rank {tp_rank} in {path} has shape "
                                          f"{state[name]}, expected {want} for TP {self.tp}; the "
                                          "checkpoint does not match its own transformer_config")
            extra = sorted(set(state) - set(expected))
            if extra:
                raise ConversionError(f"{path} (chunk {chunk}) has {len(extra)} unexpected parameter(s) (e.g. "
                                      f"{extra[0]!r}); the checkpoint does not match its own transformer_config, "
                                      "noop layers and pipeline layout")

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the name in the file, the rank file) of the first piece of ``name`` holding NaN / Inf (with
        ``finite``: the first piece); the load directory when no stored piece does (the merged --lora-load
        adapters brought them)."""
        if name not in self.supplied:
            stage, chunk, local = layout.locations[name][0]
            key, stored = layout.chunk_keys[chunk], self._stored_name(stage, chunk, local)
            for rank in self._ranks_holding(self._stored_shard(name, layout), name in layout.experts, layout):
                if finite or non_finite_count(self._stored_piece(self._map(rank, stage)[key], stage, chunk, local)):
                    return stored, self.path(rank, stage)
        return name, f"{self.load_dir} merged with its --lora-load adapters"

    def describe(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """What :meth:`read` gives, on the meta device (the merged adapters keep the base's dtype and shape)."""
        if name in self.supplied:
            return [tensor.to("meta") for tensor in self.read(name, hf_names, layout)]
        stage, chunk, local = layout.locations[name][0]
        rank = self._ranks_holding(layout.shards[name], name in layout.experts, layout)[0]
        dtype = self._stored_piece(self._map(rank, stage)[layout.chunk_keys[chunk]], stage, chunk, local).dtype
        full = self._to_our_layout(name, torch.empty(layout.full_shapes[name], dtype=dtype, device="meta"))
        return to_hf(layout.rules[name][0], full, layout.context(name))

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """The HF tensors of our parameter ``name``: its pieces joined over the ranks, in HF's form."""
        if name in self.supplied:  # not in the files: the overlay's tensor
            return to_hf(layout.rules[name][0], self.overlay(name, None), layout.context(name))
        stage, chunk, local = layout.locations[name][0]  # (the tied copy on the last stage is not read)
        key = layout.chunk_keys[chunk]
        shard = self._stored_shard(name, layout)
        expert = name in layout.experts
        full: Optional[torch.Tensor] = None
        for rank in self._ranks_holding(shard, expert, layout):
            mapped = self._map(rank, stage)
            piece = self._stored_piece(mapped[key], stage, chunk, local)
            if full is None:
                full = piece.new_empty(layout.full_shapes[name])
            experts = expert_slice(full, layout.expert_index(rank), layout.ep) if expert else full
            if shard is None:
                experts.copy_(piece)
            else:
                self._place(name, shard, piece, rank % self.tp, experts)
            if (rank, stage) in self._file_backed:
                release_pages(piece)
            del piece, mapped
        full = self._to_our_layout(name, full)
        if self.overlay is not None:  # --lora-load: the adapters merged in
            full = self.overlay(name, full)
        return to_hf(layout.rules[name][0], full, layout.context(name))


MADV_DONTNEED = 4  # madvise advice (sys/mman.h): drop the pages; a file-backed mapping reads them again


def release_pages(tensor: torch.Tensor) -> None:
    """Drop the resident pages that lie wholly inside a memory-mapped (file-backed) tensor's bytes: touched
    again, they are read from the file. Keeps a conversion's memory at one tensor while its source files
    stay mapped. Elsewhere than Linux / glibc this does nothing."""
    start, end = tensor.data_ptr(), tensor.data_ptr() + tensor.nbytes
    first, last = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE, end // mmap.PAGESIZE * mmap.PAGESIZE
    if last <= first:
        return
    try:
        ctypes.CDLL(None).madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), MADV_DONTNEED)
    except (OSError, AttributeError):
        pass


class MegatronSink:
    """Slices each full tensor over the target TP ranks and places it on its pipeline stage(s).

    Each slice is written into its (TP rank, stage) file at once (:class:`StreamingCheckpoint`;
    the file keeps a placeholder), and the file is closed when its last parameter arrives, then
    the tracker: no file's tensors are held in memory. The source is read once: each tensor goes to
    every target rank of its stage(s), whose files are open together.
    """

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str,
                 hf_config: Optional[Dict[str, Any]]) -> None:
        self.save_dir, self.layout, self.family_name, self.hf_config = save_dir, layout, family_name, hf_config
        # per_file[(rank, pp_rank)][chunk] -> state dict; missing[(rank, pp_rank)] -> names still to come;
        # rank = ep_rank * tp + tp_rank (one file per TP rank and EP rank of a stage)
        self.per_file: Dict[Tuple[int, int], List[Dict[str, torch.Tensor]]] = {}
        self.missing: Dict[Tuple[int, int], set] = {
            (rank, pp): {(chunk, name) for chunk, names in enumerate(layout.chunk_names[pp]) for name in names}
            for pp in range(layout.pp) for rank in range(layout.ranks)}
        self.saved: set = set()
        self.writers: Dict[Tuple[int, int], StreamingCheckpoint] = {}  # files being written

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        """Source names grouped by target file (pipeline stage), largest tensors first within a stage, so
        that one file is filled at a time and big tensors arrive while it is still small."""
        def key(name: str) -> Tuple[int, int]:
            target = targets[name]
            return self.layout.locations[target][0][0], -math.prod(self.layout.full_shapes[target])
        return sorted(names, key=key)

    def prepare(self, name: str, tensors: Sequence[torch.Tensor]) -> List[Tuple[int, Location, torch.Tensor]]:
        """Each target rank's piece of our parameter ``name`` (from its HF ``tensors``): (rank, where, piece),
        contiguous. Touches no file: it may run ahead of :meth:`write`, on another thread."""
        layout = self.layout
        full = to_ours(layout.rules[name][0], tensors, layout.context(name))
        check_shape(name, full, layout.full_shapes[name])
        pieces = []
        for where in layout.locations[name]:
            shard, expert = layout.local_shards[where], where in layout.expert_locations
            for rank in range(layout.ranks):
                experts = expert_slice(full, layout.expert_index(rank), layout.ep) if expert else full
                pieces.append((rank, where, self._piece(where[2], experts, shard, rank % layout.tp).contiguous()))
        return pieces

    def write(self, name: str, pieces: List[Tuple[int, Location, torch.Tensor]]) -> None:
        """The :meth:`prepare` d pieces of ``name`` into their (rank, stage) files; a file is closed after its
        last parameter."""
        for rank, (stage, chunk, local), value in pieces:
            file = (rank, stage)
            self.per_file.setdefault(file, [{} for _ in range(self.layout.vpp)])[chunk][local] = \
                self._add(rank, stage, chunk, local, value)  # written now; the file keeps a placeholder
            self.missing[file].discard((chunk, local))
            if not self.missing[file]:
                self._save(rank, stage)

    def _add(self, rank: int, stage: int, chunk: int, local: str, value: torch.Tensor) -> Any:
        """Write ``rank``'s piece ``value`` of our parameter ``local`` into its file now; what the chunk's state
        dict keeps for it until the file is closed (ours: the file's placeholder)."""
        return self._file(rank, stage).add(value)

    def _piece(self, name: str, full: torch.Tensor, shard: Optional[TPShard], rank: int) -> torch.Tensor:
        """TP rank ``rank``'s piece of the full tensor of parameter ``name`` (our layout)."""
        return shard.shard(full, rank, self.layout.tp) if shard is not None else full

    def _file(self, rank: int, stage: int) -> StreamingCheckpoint:
        """The open (rank, stage) file, created at its first tensor."""
        if (rank, stage) not in self.writers:
            layout = self.layout
            path = checkpoint_file(self.save_dir, None, rank % layout.tp, stage, layout.pp, release=True,
                                   ep_rank=rank // layout.tp, ep_size=layout.ep_files)
            self.writers[(rank, stage)] = StreamingCheckpoint(path)
        return self.writers[(rank, stage)]

    def _save(self, rank: int, stage: int) -> None:
        layout = self.layout
        chunks = self.per_file.pop((rank, stage), None) or [{} for _ in range(layout.vpp)]
        self.saved.add((rank, stage))
        ordered = [{n: state[n] for n in names} for state, names in zip(chunks, layout.chunk_names[stage])]
        self._file(rank, stage).close({**dict(zip(layout.chunk_keys, self._stored_states(stage, ordered))),
                                       **self._metadata()})
        del self.writers[(rank, stage)]

    def _stored_states(self, stage: int, chunks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Each chunk's state dict as the file stores it (ours: as built)."""
        return chunks

    def _metadata(self) -> Dict[str, Any]:
        """Everything a file holds besides the model."""
        return {"args": checkpoint_args(self.layout, self.family_name),
                "transformer_config": self.layout.config.to_dict(), "hf_config": self.hf_config,
                "checkpoint_version": CHECKPOINT_VERSION, "iteration": 0}

    def finish(self) -> None:
        unwritten = sorted(file for file, names in self.missing.items() if names)
        if unwritten:
            raise AssertionError(f"files (tp + ep x TP, pp) {unwritten} never received all their parameters")
        for rank, stage in sorted(set(self.missing) - self.saved):  # stages holding only noop layers
            self._save(rank, stage)
        write_tracker(self.save_dir, None, release=True)


def checkpoint_args(layout: ModelLayout, family_name: str) -> argparse.Namespace:
    """Megatron flag-style fields describing the saved model and its parallel layout."""
    config = layout.config
    dtype = config.params_dtype
    vpp = layout.vpp if layout.vpp > 1 else None
    counts = [len(chunks[0]) for chunks in layout.placement]
    even = len(set(counts)) == 1
    args = argparse.Namespace(
        num_layers=config.num_layers, hidden_size=config.hidden_size, ffn_hidden_size=config.ffn_hidden_size,
        num_attention_heads=config.num_attention_heads, num_query_groups=config.num_query_groups,
        group_query_attention=config.num_query_groups != config.num_attention_heads,
        kv_channels=config.kv_channels, seq_length=config.max_position_embeddings,
        max_position_embeddings=config.max_position_embeddings,
        tensor_model_parallel_size=config.tensor_model_parallel_size, pipeline_model_parallel_size=layout.pp,
        expert_model_parallel_size=layout.ep, expert_tensor_parallel_size=config.expert_tensor_parallel_size,
        virtual_pipeline_model_parallel_size=vpp,
        num_layers_per_virtual_pipeline_stage=len(layout.placement[0][0]) if vpp else None,
        num_layer_list=None if vpp or even else tuple(counts),
        noop_layers=tuple(config.noop_layers),
        vocab_size=config.vocab_size, padded_vocab_size=config.padded_vocab_size,
        make_vocab_size_divisible_by=config.make_vocab_size_divisible_by, model_type_hf=family_name,
        normalization=config.normalization, norm_epsilon=config.norm_epsilon,
        position_embedding_type=config.position_embedding_type, rotary_base=config.rotary_base,
        rope_scaling_type=config.rope_scaling_type, rope_scaling_factor=config.rope_scaling_factor,
        swiglu=config.activation == "swiglu", add_bias_linear=config.add_bias_linear,
        disable_bias_linear=not config.add_bias_linear,
        add_qkv_bias=config.add_qkv_bias,
        untie_embeddings_and_output_weights=config.untie_embeddings_and_output_weights,
        params_dtype=dtype, bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16,
        iteration=0, consumed_train_samples=0, consumed_valid_samples=0)
    return namespace_for_checkpoint(args)


