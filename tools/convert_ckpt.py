"""Convert checkpoints between Hugging Face safetensors and Megatron's sharded layout.

Hugging Face -> Megatron (TP shards)::

    python tools/convert_ckpt.py --load-model-type hf --save-model-type mg \\
        --target-tensor-parallel-size 2 --target-pipeline-parallel-size 1 \\
        --model-type-hf llama2 --load-dir ./llama-2-7b-hf --save-dir ./llama-2-7b-mcore-tp2

Megatron -> Hugging Face::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type hf \\
        --load-dir ./llama-2-7b-mcore-tp2 --save-dir ./llama-2-7b-hf-out --max-shard-size 5GB

Megatron -> Megatron (re-shard to another TP size)::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type mg \\
        --target-tensor-parallel-size 1 --load-dir ./ckpt-tp2 --save-dir ./ckpt-tp1

What it writes:

* ``mg``: ``<save-dir>/release/mp_rank_XX/model_optim_rng.pt`` per TP rank with
  ``model`` (state dict), ``args`` (Megatron flag-style namespace),
  ``transformer_config``, ``hf_config`` (the source ``config.json``, so the way
  back gives an equivalent config), ``checkpoint_version`` and ``iteration`` = 0;
  then ``latest_checkpointed_iteration.txt`` = ``release``, last.
* ``hf``: ``model.safetensors`` (or ``model-0000k-of-0000n.safetensors`` shards
  plus ``model.safetensors.index.json`` when larger than ``--max-shard-size``)
  and ``config.json``, last.

Every tensor goes through one canonical form, the Hugging Face tensors of the
registry's weight map (``mindspeed_llm/models/registry.py``), and is split or
joined over TP with the production shard specs (``param.tp_shard`` of a
``GPTModel`` built on the meta device). Tensors stream one at a time, layer by
layer: the converter never holds two full copies of the model. Any input error
(missing directory, config or tensor; unknown family; a TP size that does not
divide the heads) is one line on stderr with exit code 2, detected before
anything is written; a run that fails midway leaves no tracker/``config.json``,
so nothing partial looks valid. Pipeline-parallel targets come with pipeline
support; only ``--target-pipeline-parallel-size 1`` is accepted now.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from tqdm import tqdm

from core.checkpointing import (
    CHECKPOINT_VERSION,
    TRACKER_FILENAME,
    CheckpointError,
    atomic_save,
    checkpoint_file,
    load_file,
    namespace_for_checkpoint,
    read_tracker,
    write_tracker,
)
from core.models.gpt_model import GPTModel
from core.parallel_state import Group
from core.tensor_parallel.layers import TPShard
from core.transformer.config import TransformerConfig
from mindspeed_llm.models.registry import (
    IGNORED_HF_TENSORS,
    Family,
    RegistryError,
    TensorContext,
    WeightRule,
    find_rule,
    get_family,
    to_hf,
    to_ours,
)

SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
HF_CONFIG = "config.json"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
HF_MODEL_TYPES = {"llama": "llama2", "mistral": "mistral", "qwen2": "qwen2"}


class ConversionError(RuntimeError):
    """A bad input; the message is one line naming the path or flag and the fix."""


# --------------------------------------------------------------------------- arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Convert HF <-> Megatron (mg) checkpoints.")
    parser.add_argument("--load-model-type", choices=("hf", "mg"), required=True)
    parser.add_argument("--save-model-type", choices=("hf", "mg"), required=True)
    parser.add_argument("--load-dir", required=True)
    parser.add_argument("--save-dir", required=True)
    parser.add_argument("--model-type-hf", default=None,
                        help="family: llama2 (llama, llama3), mistral, qwen2; default: from config.json/checkpoint")
    parser.add_argument("--target-tensor-parallel-size", type=int, default=1)
    parser.add_argument("--target-pipeline-parallel-size", type=int, default=1)
    parser.add_argument("--make-vocab-size-divisible-by", type=int, default=None,
                        help="vocab padding multiple (x TP); default 1 from HF, the source's value from mg")
    parser.add_argument("--params-dtype", choices=tuple(DTYPES), default=None, help="default: keep")
    parser.add_argument("--max-shard-size", default="5GB", help="HF output shard size, e.g. 5GB, 500MB, 2GiB")
    return parser


def parse_size(text: str) -> int:
    """Bytes in ``5GB`` / ``500MB`` / ``2GiB`` / ``1000`` (decimal and binary units, as HF)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)?\s*", text, flags=re.IGNORECASE)
    if not match:
        raise ConversionError(f"--max-shard-size {text!r} is not a size; write e.g. 5GB, 500MB or 2GiB")
    number, unit = float(match.group(1)), (match.group(2) or "B").upper()
    scale = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    return max(int(number * scale), 1)


def validate_args(args: argparse.Namespace) -> None:
    if args.target_pipeline_parallel_size != 1:
        raise ConversionError(f"--target-pipeline-parallel-size {args.target_pipeline_parallel_size} is not "
                              "supported yet (PP conversion comes with pipeline support); use 1")
    if args.target_tensor_parallel_size < 1:
        raise ConversionError("--target-tensor-parallel-size must be >= 1")
    if args.make_vocab_size_divisible_by is not None and args.make_vocab_size_divisible_by < 1:
        raise ConversionError("--make-vocab-size-divisible-by must be >= 1")
    if not os.path.isdir(args.load_dir):
        raise ConversionError(f"--load-dir {args.load_dir} does not exist or is not a directory; "
                              "pass the directory that holds the checkpoint")
    if os.path.abspath(args.load_dir) == os.path.abspath(args.save_dir):
        raise ConversionError("--save-dir must differ from --load-dir; write the conversion to a new directory")
    parse_size(args.max_shard_size)
    if args.model_type_hf is not None:
        get_family(args.model_type_hf)


# --------------------------------------------------------------------------- model layout


class ModelLayout:
    """Parameter names, full shapes and TP shard specs of our model at a TP size (meta device)."""

    def __init__(self, config: TransformerConfig, rules: Sequence[WeightRule]) -> None:
        self.config, self.tp = config, config.tensor_model_parallel_size
        with torch.device("meta"):
            model = GPTModel(config, Group(list(range(self.tp)), None, 0))
        self.shards: Dict[str, Optional[TPShard]] = {}
        self.full_shapes: Dict[str, Tuple[int, ...]] = {}
        for name, param in model.named_parameters():
            shard = getattr(param, "tp_shard", None)
            shape = list(param.shape)
            if shard is not None:
                shape[shard.dim] = shard.full_size
            self.shards[name], self.full_shapes[name] = shard, tuple(shape)
        self.names: List[str] = list(self.shards)
        self.rules = {name: find_rule(rules, name) for name in self.names}

    def context(self, name: str) -> TensorContext:
        shard = self.shards[name]
        splits = tuple(seg.size for seg in shard.segments) if shard is not None else ()
        return TensorContext(splits, self.config.vocab_size, self.config.padded_vocab_size)

    def hf_names(self) -> List[str]:
        return [hf for name in self.names for hf in self.rules[name][1]]


def check_tp(config: TransformerConfig, tp: int, source: str) -> None:
    """Reject a target TP that does not divide the heads, KV heads or FFN (named with our flag)."""
    heads, groups, ffn = config.num_attention_heads, config.num_query_groups, config.ffn_hidden_size
    problems = []
    if heads % tp:
        problems.append(f"num_attention_heads {heads}")
    if (groups >= tp and groups % tp) or (groups < tp and tp % groups):
        problems.append(f"num_key_value_heads {groups} (must divide or be divided by TP)")
    if ffn % tp:
        problems.append(f"ffn_hidden_size {ffn}")
    if problems:
        raise ConversionError(f"--target-tensor-parallel-size {tp} does not divide {', '.join(problems)} "
                              f"of {source}; choose a TP size that divides them")


def with_tp(config: TransformerConfig, tp: int, divisible_by: int, dtype: Optional[torch.dtype],
            source: str) -> TransformerConfig:
    check_tp(config, tp, source)
    changes: Dict[str, Any] = {"tensor_model_parallel_size": tp, "make_vocab_size_divisible_by": divisible_by}
    if dtype is not None:
        changes["params_dtype"] = dtype
    try:
        return dataclasses.replace(config, **changes)
    except ValueError as error:
        raise ConversionError(f"{source}: {error}") from None


# --------------------------------------------------------------------------- sources


class HFSource:
    """Reads HF tensors lazily from ``model.safetensors`` or an index of shards."""

    def __init__(self, load_dir: str, family_name: Optional[str], stack: contextlib.ExitStack) -> None:
        self.load_dir = load_dir
        self.hf_config = read_hf_config(load_dir)
        self.family_name = family_name or infer_family(self.hf_config, load_dir)
        self.family: Family = get_family(self.family_name)
        try:
            self.config = TransformerConfig(**self.family.to_config(self.hf_config))
        except (RegistryError, ValueError) as error:
            raise ConversionError(f"{os.path.join(load_dir, HF_CONFIG)}: {error}") from None
        self.where, self.files = self._open(stack)

    def _open(self, stack: contextlib.ExitStack) -> Tuple[Dict[str, str], Dict[str, Any]]:
        """Tensor name -> shard file, and file -> open handle (headers only)."""
        index_path = os.path.join(self.load_dir, SAFETENSORS_INDEX)
        single_path = os.path.join(self.load_dir, SAFETENSORS_SINGLE)
        if os.path.isfile(index_path):
            with open(index_path) as handle:
                weight_map = json.load(handle).get("weight_map", {})
            self.listing = index_path
        elif os.path.isfile(single_path):
            weight_map, self.listing = None, single_path
        else:
            raise ConversionError(f"--load-dir {self.load_dir} has neither {SAFETENSORS_SINGLE} nor "
                                  f"{SAFETENSORS_INDEX}; save the model with save_pretrained(safe_serialization=True)")
        files = sorted(set(weight_map.values())) if weight_map is not None else [SAFETENSORS_SINGLE]
        handles = {}
        for file in files:
            path = os.path.join(self.load_dir, file)
            if not os.path.isfile(path):
                raise ConversionError(f"{index_path} lists shard {file}, which is missing from {self.load_dir}; "
                                      "copy the complete checkpoint")
            handles[file] = stack.enter_context(safe_open(path, framework="pt"))
        where = {name: file for file, handle in handles.items() for name in handle.keys()}
        if weight_map is not None:  # trust the index only where the shard agrees
            where = {name: file for name, file in weight_map.items() if where.get(name) == file}
        return where, handles

    def check(self, layout: ModelLayout) -> None:
        """Every tensor the map needs is present, and every present tensor is used."""
        needed = layout.hf_names()
        for name in needed:
            if name not in self.where:
                raise ConversionError(f"tensor {name!r} is missing from {self.listing}; the weights do not match "
                                      f"config.json / --model-type-hf {self.family_name}")
        unused = [n for n in self.where if n not in set(needed) and not _ignorable(n, layout.config)]
        if unused:
            raise ConversionError(f"{len(unused)} tensor(s) in {self.listing} are not used by --model-type-hf "
                                  f"{self.family_name} (e.g. {unused[0]!r}); pick the family that matches config.json")
        for name in layout.names:  # shapes, from the headers only (meta tensors)
            rule, hf_names = layout.rules[name]
            metas = [torch.empty(self.files[self.where[n]].get_slice(n).get_shape(), device="meta") for n in hf_names]
            try:
                full = to_ours(rule, metas, layout.context(name))
            except RegistryError as error:
                raise ConversionError(f"{name} from {list(hf_names)} in {self.listing}: {error}") from None
            _check_shape(name, full, layout.full_shapes[name])

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        return [self.files[self.where[n]].get_tensor(n) for n in hf_names]


def _ignorable(name: str, config: TransformerConfig) -> bool:
    if any(pattern.match(name) for pattern in IGNORED_HF_TENSORS):
        return True
    return name == "lm_head.weight" and not config.untie_embeddings_and_output_weights  # tied copy


def read_hf_config(load_dir: str) -> Dict[str, Any]:
    path = os.path.join(load_dir, HF_CONFIG)
    if not os.path.isfile(path):
        raise ConversionError(f"--load-dir {load_dir} has no {HF_CONFIG}: not a Hugging Face model directory "
                              "(for a Megatron checkpoint pass --load-model-type mg)")
    with open(path) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ConversionError(f"{path} is not valid JSON ({error}); restore the file") from None


def infer_family(hf_config: Dict[str, Any], where: str) -> str:
    model_type = hf_config.get("model_type")
    if model_type in HF_MODEL_TYPES:
        return HF_MODEL_TYPES[model_type]
    raise ConversionError(f"{where}: cannot tell the family of model_type {model_type!r}; pass --model-type-hf")


class MegatronSource:
    """Reads every TP rank's state dict; yields full tensors in the HF canonical form."""

    def __init__(self, load_dir: str, family_name: Optional[str]) -> None:
        tracker = read_tracker(load_dir)
        if tracker is None:
            raise ConversionError(f"--load-dir {load_dir} has no {TRACKER_FILENAME}: not a Megatron checkpoint "
                                  "(for a Hugging Face directory pass --load-model-type hf)")
        self.iteration, self.release = tracker
        first = self._load(load_dir, 0)
        args = first.get("args") or argparse.Namespace()
        self.tp = int(getattr(args, "tensor_model_parallel_size", 1))
        self.config = self._config(first, args, load_dir)
        self.hf_config = first.get("hf_config")
        name = family_name or getattr(args, "model_type_hf", None) or infer_from(self.hf_config)
        self.family_name = name or "llama2"  # every registered family shares the weight layout
        self.family = get_family(self.family_name)
        self.state_dicts = [_model_dict(first, load_dir)]
        del first
        for rank in range(1, self.tp):
            self.state_dicts.append(_model_dict(self._load(load_dir, rank), load_dir))

    def _load(self, load_dir: str, tp_rank: int) -> Dict[str, Any]:
        path = checkpoint_file(load_dir, self.iteration, tp_rank, 0, 1, release=self.release)
        if tp_rank == 0 and not os.path.isfile(path):
            pp_path = checkpoint_file(load_dir, self.iteration, 0, 0, 2, release=self.release)
            if os.path.isfile(pp_path):
                raise ConversionError(f"{load_dir} is pipeline-parallel ({os.path.dirname(pp_path)}); PP conversion "
                                      "comes with pipeline support")
        try:
            return load_file(path)
        except CheckpointError as error:
            raise ConversionError(str(error)) from None

    def _config(self, first: Dict[str, Any], args: argparse.Namespace, load_dir: str) -> TransformerConfig:
        if int(getattr(args, "pipeline_model_parallel_size", 1)) != 1:
            raise ConversionError(f"{load_dir} was saved with pipeline_model_parallel_size "
                                  f"{args.pipeline_model_parallel_size}; PP conversion comes with pipeline support")
        values = first.get("transformer_config") or vars(args)
        try:
            config = TransformerConfig.from_dict({**values, "tensor_model_parallel_size": self.tp})
        except (TypeError, ValueError) as error:
            raise ConversionError(f"{load_dir}: cannot rebuild the model config ({error})") from None
        return config

    def check(self, layout: ModelLayout) -> None:
        for rank, state in enumerate(self.state_dicts):
            for name in layout.names:
                if name not in state:
                    path = checkpoint_file("<load-dir>", self.iteration, rank, 0, 1, release=self.release)
                    raise ConversionError(f"parameter {name!r} is missing from {path}; the checkpoint does not "
                                          "match its own transformer_config")
                shard, expected = layout.shards[name], list(layout.full_shapes[name])
                if shard is not None:
                    expected[shard.dim] = shard.local_size(self.tp)
                if list(state[name].shape) != expected:
                    raise ConversionError(f"parameter {name!r} of TP rank {rank} has shape {tuple(state[name].shape)}, "
                                          f"expected {tuple(expected)} for TP {self.tp}; the checkpoint does not "
                                          "match its own transformer_config")

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        locals_ = [state.pop(name) for state in self.state_dicts]  # free the source as we go
        shard = layout.shards[name]
        full = shard.unshard(locals_) if shard is not None else locals_[0]
        return to_hf(layout.rules[name][0], full, layout.context(name))


def infer_from(hf_config: Optional[Dict[str, Any]]) -> Optional[str]:
    return HF_MODEL_TYPES.get((hf_config or {}).get("model_type"))


def _model_dict(checkpoint: Dict[str, Any], load_dir: str) -> Dict[str, torch.Tensor]:
    model = checkpoint.get("model")
    if not isinstance(model, dict):
        raise ConversionError(f"{load_dir}: the checkpoint has no 'model' state dict (virtual-pipeline "
                              "checkpoints with model0, model1, ... are not supported yet)")
    return model


# --------------------------------------------------------------------------- sinks


class MegatronSink:
    """Slices each full tensor over the target TP ranks; writes rank files, then the tracker."""

    def __init__(self, save_dir: str, layout: ModelLayout, family_name: str,
                 hf_config: Optional[Dict[str, Any]]) -> None:
        self.save_dir, self.layout, self.family_name, self.hf_config = save_dir, layout, family_name, hf_config
        self.per_rank: List[Dict[str, torch.Tensor]] = [{} for _ in range(layout.tp)]

    def write(self, name: str, tensors: Sequence[torch.Tensor]) -> None:
        layout = self.layout
        full = to_ours(layout.rules[name][0], tensors, layout.context(name))
        _check_shape(name, full, layout.full_shapes[name])
        shard = layout.shards[name]
        for rank, state in enumerate(self.per_rank):
            state[name] = shard.shard(full, rank, layout.tp) if shard is not None else full

    def finish(self) -> None:
        _remove_stale(self.save_dir, [TRACKER_FILENAME])
        config = self.layout.config
        for rank, state in enumerate(self.per_rank):
            checkpoint = {
                "model": state,
                "args": checkpoint_args(config, self.family_name),
                "transformer_config": config.to_dict(),
                "hf_config": self.hf_config,
                "checkpoint_version": CHECKPOINT_VERSION,
                "iteration": 0,
            }
            atomic_save(checkpoint, checkpoint_file(self.save_dir, None, rank, 0, 1, release=True))
            self.per_rank[rank] = {}
        write_tracker(self.save_dir, None, release=True)


def checkpoint_args(config: TransformerConfig, family_name: str) -> argparse.Namespace:
    """Megatron flag-style fields describing the saved model."""
    dtype = config.params_dtype
    args = argparse.Namespace(
        num_layers=config.num_layers, hidden_size=config.hidden_size, ffn_hidden_size=config.ffn_hidden_size,
        num_attention_heads=config.num_attention_heads, num_query_groups=config.num_query_groups,
        group_query_attention=config.num_query_groups != config.num_attention_heads,
        kv_channels=config.kv_channels, seq_length=config.max_position_embeddings,
        max_position_embeddings=config.max_position_embeddings,
        tensor_model_parallel_size=config.tensor_model_parallel_size, pipeline_model_parallel_size=1,
        vocab_size=config.vocab_size, padded_vocab_size=config.padded_vocab_size,
        make_vocab_size_divisible_by=config.make_vocab_size_divisible_by, model_type_hf=family_name,
        normalization=config.normalization, norm_epsilon=config.norm_epsilon,
        position_embedding_type=config.position_embedding_type, rotary_base=config.rotary_base,
        rope_scaling_type=config.rope_scaling_type, rope_scaling_factor=config.rope_scaling_factor,
        swiglu=config.swiglu, add_bias_linear=config.add_bias_linear, disable_bias_linear=not config.add_bias_linear,
        add_qkv_bias=config.add_qkv_bias,
        untie_embeddings_and_output_weights=config.untie_embeddings_and_output_weights,
        params_dtype=dtype, bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16,
        iteration=0, consumed_train_samples=0, consumed_valid_samples=0)
    return namespace_for_checkpoint(args)


class HFSink:
    """Buffers HF tensors up to ``max_shard_size``, writes shards under temporary names, renames at the end."""

    def __init__(self, save_dir: str, max_shard_size: int, hf_config: Dict[str, Any]) -> None:
        self.save_dir, self.max_shard_size, self.hf_config = save_dir, max_shard_size, hf_config
        self.buffer: Dict[str, torch.Tensor] = {}
        self.buffer_bytes = 0
        self.shards: List[Tuple[str, List[str]]] = []  # (temporary path, tensor names)
        self.total_size = 0
        self.started = False

    def add(self, name: str, tensor: torch.Tensor) -> None:
        nbytes = tensor.numel() * tensor.element_size()
        if self.buffer and self.buffer_bytes + nbytes > self.max_shard_size:
            self._flush()
        self.buffer[name] = tensor.contiguous()
        self.buffer_bytes += nbytes
        self.total_size += nbytes

    def _flush(self) -> None:
        if not self.started:
            os.makedirs(self.save_dir, exist_ok=True)
            _remove_stale(self.save_dir, [HF_CONFIG, SAFETENSORS_INDEX, SAFETENSORS_SINGLE])
            self.started = True
        path = os.path.join(self.save_dir, f".shard-{len(self.shards) + 1:05d}.safetensors.tmp")
        save_file(self.buffer, path, metadata={"format": "pt"})
        self.shards.append((path, list(self.buffer)))
        self.buffer, self.buffer_bytes = {}, 0

    def abort(self) -> None:
        """Remove the temporary shards of a failed run."""
        for path, _ in self.shards:
            if os.path.isfile(path):
                os.remove(path)

    def finish(self) -> None:
        if self.buffer or not self.shards:
            self._flush()
        count = len(self.shards)
        weight_map = {}
        for number, (tmp, names) in enumerate(self.shards, start=1):
            final = SAFETENSORS_SINGLE if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
            os.replace(tmp, os.path.join(self.save_dir, final))
            weight_map.update({name: final for name in names})
        if count > 1:
            index = {"metadata": {"total_size": self.total_size}, "weight_map": dict(sorted(weight_map.items()))}
            _write_json(os.path.join(self.save_dir, SAFETENSORS_INDEX), index)
        _write_json(os.path.join(self.save_dir, HF_CONFIG), self.hf_config)


class HFWeightSink:
    """Adapts :class:`HFSink` to the per-parameter ``write`` interface."""

    def __init__(self, sink: HFSink, layout: ModelLayout) -> None:
        self.sink, self.layout = sink, layout

    def write(self, name: str, tensors: Sequence[torch.Tensor]) -> None:
        for hf_name, tensor in zip(self.layout.rules[name][1], tensors):
            self.sink.add(hf_name, tensor)

    def finish(self) -> None:
        self.sink.finish()

    def abort(self) -> None:
        self.sink.abort()


def _check_shape(name: str, tensor: torch.Tensor, expected: Tuple[int, ...]) -> None:
    if tuple(tensor.shape) != expected:
        raise ConversionError(f"{name}: the weights give shape {tuple(tensor.shape)}, the config implies "
                              f"{expected}; the checkpoint does not match its config")


def _remove_stale(save_dir: str, names: Iterable[str]) -> None:
    """Remove markers of an earlier conversion so a failed run never looks complete."""
    for name in names:
        path = os.path.join(save_dir, name)
        if os.path.isfile(path):
            os.remove(path)


def _write_json(path: str, value: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- driver


def open_source(args: argparse.Namespace, stack: contextlib.ExitStack):
    if args.load_model_type == "hf":
        return HFSource(args.load_dir, args.model_type_hf, stack)
    return MegatronSource(args.load_dir, args.model_type_hf)


def target_config(args: argparse.Namespace, source) -> TransformerConfig:
    """The saved model's config: the source's at the target TP (mg) or at TP 1 (hf)."""
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    if args.save_model_type == "hf":
        return with_tp(source.config, 1, 1, dtype, args.load_dir)
    divisible_by = args.make_vocab_size_divisible_by
    if divisible_by is None:
        divisible_by = 1 if args.load_model_type == "hf" else source.config.make_vocab_size_divisible_by
    return with_tp(source.config, args.target_tensor_parallel_size, divisible_by, dtype, args.load_dir)


def open_sink(args: argparse.Namespace, source, layout: ModelLayout):
    if args.save_model_type == "mg":
        return MegatronSink(args.save_dir, layout, source.family_name, source.hf_config)
    try:
        hf_config = source.family.to_hf_config(layout.config, source.hf_config)
    except RegistryError as error:
        raise ConversionError(f"{args.load_dir}: {error}") from None
    return HFWeightSink(HFSink(args.save_dir, parse_size(args.max_shard_size), hf_config), layout)


def convert(args: argparse.Namespace) -> None:
    validate_args(args)
    with contextlib.ExitStack() as stack:
        source = open_source(args, stack)
        for note in source.family.unmodelled_settings(source.hf_config or {}):
            print(f"convert_ckpt: note: {note}", file=sys.stderr)
        source_layout = ModelLayout(source.config, source.family.weights)
        layout = ModelLayout(target_config(args, source), source.family.weights)
        source.check(source_layout)
        sink = open_sink(args, source, layout)
        dtype = DTYPES[args.params_dtype] if args.params_dtype else None
        try:
            for name in tqdm(source_layout.names, desc="converting", unit="tensor"):
                tensors = source.read(name, source_layout.rules[name][1], source_layout)
                sink.write(name, [t.to(dtype) if dtype is not None else t for t in tensors])
            sink.finish()
        except BaseException:
            getattr(sink, "abort", lambda: None)()
            raise


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the converter; returns the exit code (2 with a one-line message on bad input)."""
    args = build_parser().parse_args(argv)
    try:
        convert(args)
    except (ConversionError, RegistryError) as error:
        print(f"convert_ckpt: error: {error}", file=sys.stderr)
        return 2
    print(f"convert_ckpt: wrote {args.save_model_type} checkpoint to {args.save_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
