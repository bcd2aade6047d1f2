"""Hugging Face checkpoints: ``config.json`` plus ``model.safetensors`` or an index of shards.

:class:`HFSource` reads the HF tensors our parameters need (the registry's weight map names them);
:class:`HFSink` writes safetensors shards of at most ``--max-shard-size``, ``config.json`` last.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from safetensors import SafetensorError, safe_open

from core.transformer.config import TransformerConfig
from mindspeed_llm.convert.errors import ConversionError, check_shape
from mindspeed_llm.convert.files import HF_CONFIG, SAFETENSORS_INDEX, SAFETENSORS_SINGLE, write_json
from mindspeed_llm.convert.layout import ModelLayout
from mindspeed_llm.models.registry import (IGNORED_HF_TENSORS, Family, RegistryError, family_for_hf_config,
                                           get_family, to_ours)

class HFSource:
    """Reads HF tensors from ``model.safetensors`` or an index of shards, one tensor at a time.

    A shard is opened (memory-mapped) only for the read of one tensor and closed after it, so the
    pages read do not stay in this process's resident memory.
    """

    def __init__(self, load_dir: str, family_name: Optional[str]) -> None:
        self.load_dir = load_dir
        self.hf_config = read_hf_config(load_dir)
        self.family: Family = resolve_family(family_name, self.hf_config, os.path.join(load_dir, HF_CONFIG))
        self.family_name = self.family.name
        try:
            self.config = TransformerConfig(**self.family.to_config(self.hf_config))
        except (RegistryError, ValueError) as error:
            raise ConversionError(f"{os.path.join(load_dir, HF_CONFIG)}: {error}") from None
        self.where, self.shapes = self._index()
        self._drop_absent_mtp_layers()

    def _drop_absent_mtp_layers(self) -> None:
        """A config.json with MTP layers (``num_nextn_predict_layers``) over weights without them (transformers
        drops them when it saves DeepSeek-V3 or GLM-4.5): convert the model transformers sees, without MTP."""
        depth = self.config.mtp_num_layers
        if not depth or any(n.startswith(f"model.layers.{self.config.num_layers}.") for n in self.where):
            return
        print(f"convert_ckpt: note: {self.load_dir} has no tensors of its {depth} MTP layer(s) "
              f"(model.layers.{self.config.num_layers}.*); converting without multi-token prediction",
              file=sys.stderr)
        self.config = dataclasses.replace(self.config, mtp_num_layers=None)

    def _index(self) -> Tuple[Dict[str, str], Dict[str, Tuple[int, ...]]]:
        """Tensor name -> shard path, and tensor name -> shape (from the shard headers)."""
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
        where: Dict[str, str] = {}
        shapes: Dict[str, Tuple[int, ...]] = {}
        for file in files:
            path = os.path.join(self.load_dir, file)
            if not os.path.isfile(path):
                raise ConversionError(f"{index_path} (family {self.family_name}) lists shard {file}, which is "
                                      f"missing from {self.load_dir}; copy the complete checkpoint")
            try:
                with safe_open(path, framework="pt") as handle:
                    for name in handle.keys():
                        where[name], shapes[name] = path, tuple(handle.get_slice(name).get_shape())
            except (SafetensorError, OSError) as error:
                raise ConversionError(f"{path} is truncated or not a safetensors file ({error}); copy the complete "
                                      "checkpoint again") from None
        if weight_map is not None:  # trust the index only where the shard agrees
            where = {name: os.path.join(self.load_dir, file) for name, file in weight_map.items()
                     if where.get(name) == os.path.join(self.load_dir, file)}
        return where, shapes

    def check(self, layout: ModelLayout) -> None:
        """Every tensor the map needs is present, and every present tensor is used."""
        needed = layout.hf_names()
        for name in needed:
            if name not in self.where:
                raise ConversionError(f"tensor {name!r} needed by family {self.family_name} is missing from "
                                      f"{self.listing}; the weights do not match config.json / --model-type-hf")
        unused = [n for n in self.where if n not in set(needed) and not _ignorable(n, layout)]
        if unused:
            raise ConversionError(f"{len(unused)} tensor(s) in {self.listing} are not used by --model-type-hf "
                                  f"{self.family_name} (e.g. {unused[0]!r}); pick the family that matches config.json")
        for name in layout.names:  # shapes, from the headers only (meta tensors)
            rule, hf_names = layout.rules[name]
            metas = [torch.empty(self.shapes[n], device="meta") for n in hf_names]
            try:
                full = to_ours(rule, metas, layout.context(name))
            except RegistryError as error:
                raise ConversionError(f"{name} from {list(hf_names)} in {self.listing}: {error}") from None
            check_shape(name, full, layout.full_shapes[name])

    def locate(self, name: str, hf_name: str, layout: ModelLayout, finite: bool = False) -> Tuple[str, str]:
        """(the name in the file, the file) of HF tensor ``hf_name``, read for our ``name``."""
        return hf_name, self.where[hf_name]

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """The HF tensors ``hf_names`` of our parameter ``name``, read from their shards."""
        tensors = []
        for hf_name in hf_names:
            try:
                with safe_open(self.where[hf_name], framework="pt") as handle:
                    tensors.append(handle.get_tensor(hf_name))
            except (SafetensorError, OSError) as error:
                raise ConversionError(f"{self.where[hf_name]}: tensor {hf_name!r} cannot be read ({error}); the file "
                                      "is truncated or damaged, copy the complete checkpoint again") from None
        return tensors


def _ignorable(name: str, layout: ModelLayout) -> bool:
    """An HF tensor no parameter reads: rotary caches and the like, or the tied copy of the embeddings."""
    if any(pattern.match(name) for pattern in IGNORED_HF_TENSORS):
        return True
    return name in layout.tied_output_names  # the tied copy of the word embeddings


def read_hf_config(load_dir: str) -> Dict[str, Any]:
    """``config.json`` of an HF model directory (a one-line error when absent or not JSON)."""
    path = os.path.join(load_dir, HF_CONFIG)
    if not os.path.isfile(path):
        raise ConversionError(f"--load-dir {load_dir} has no {HF_CONFIG}: not a Hugging Face model directory "
                              "(for a Megatron checkpoint pass --load-model-type mg)")
    with open(path) as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as error:
            raise ConversionError(f"{path} is not valid JSON ({error}); restore the file") from None


def resolve_family(name: Optional[str], hf_config: Optional[Dict[str, Any]], where: str) -> Family:
    """The family named by ``--model-type-hf``, else the one of ``hf_config``'s ``model_type``."""
    if name is not None:
        return get_family(name)
    if hf_config is None:  # a checkpoint trained from scratch records neither
        print(f"convert_ckpt: note: {where} records no family; converting as llama2 (pass --model-type-hf "
              "for another)", file=sys.stderr)
        return get_family("llama2")
    return family_for_hf_config(hf_config, where)


SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
                      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                      torch.uint8: "U8", torch.bool: "BOOL"}


class HFSink:
    """Writes HF tensors into safetensors shards of at most ``max_shard_size``, streaming.

    Each tensor's bytes are appended to the current shard's data file as it arrives; a shard's
    file (header + data) is assembled when it is full, so one tensor is in memory at a time.
    ``config.json`` is written last.
    """

    def __init__(self, save_dir: str, max_shard_size: int, hf_config: Dict[str, Any]) -> None:
        self.save_dir, self.max_shard_size, self.hf_config = save_dir, max_shard_size, hf_config
        self.entries: Dict[str, Dict[str, Any]] = {}  # the open shard's header entries
        self.data: Optional[Any] = None  # the open shard's data file
        self.shard_bytes = 0
        self.shards: List[Tuple[str, List[str]]] = []  # (assembled temporary path, tensor names)
        self.total_size = 0

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Append ``tensor``'s bytes to the open shard (a new one when it would exceed the shard size)."""
        nbytes = tensor.numel() * tensor.element_size()
        if self.entries and self.shard_bytes + nbytes > self.max_shard_size:
            self._close_shard()
        if self.data is None:
            os.makedirs(self.save_dir, exist_ok=True)
            self.data = open(os.path.join(self.save_dir, ".shard.data.tmp"), "wb")
        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()  # little-endian bytes
        self.data.write(raw.data)
        self.entries[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                              "data_offsets": [self.shard_bytes, self.shard_bytes + nbytes]}
        self.shard_bytes += nbytes
        self.total_size += nbytes

    def _close_shard(self) -> None:
        """Assemble the open shard: 8-byte header length, JSON header (8-byte aligned), the data."""
        data_path = os.path.join(self.save_dir, ".shard.data.tmp")
        if self.data is not None:
            self.data.close()
        else:  # no tensor at all: an empty shard
            os.makedirs(self.save_dir, exist_ok=True)
            open(data_path, "wb").close()
        header = json.dumps({"__metadata__": {"format": "pt"}, **self.entries}, separators=(",", ":")).encode()
        header += b" " * (-len(header) % 8)
        path = os.path.join(self.save_dir, f".shard-{len(self.shards) + 1:05d}.safetensors.tmp")
        with open(path, "wb") as out, open(data_path, "rb") as data:
            out.write(len(header).to_bytes(8, "little"))
            out.write(header)
            shutil.copyfileobj(data, out, 16 * 2**20)
        os.remove(data_path)
        self.shards.append((path, list(self.entries)))
        self.entries, self.data, self.shard_bytes = {}, None, 0

    def finish(self) -> None:
        """Name the shards (``model.safetensors`` or ``model-0000k-of-0000n``), then the index, then config.json."""
        if self.entries or not self.shards:
            self._close_shard()
        count = len(self.shards)
        weight_map = {}
        for number, (tmp, names) in enumerate(self.shards, start=1):
            final = SAFETENSORS_SINGLE if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
            os.replace(tmp, os.path.join(self.save_dir, final))
            weight_map.update({name: final for name in names})
        if count > 1:
            index = {"metadata": {"total_size": self.total_size}, "weight_map": dict(sorted(weight_map.items()))}
            write_json(os.path.join(self.save_dir, SAFETENSORS_INDEX), index)
        write_json(os.path.join(self.save_dir, HF_CONFIG), self.hf_config)


class HFWeightSink:
    """Adapts :class:`HFSink` to the per-parameter ``write`` interface (one pass over the source)."""

    def __init__(self, sink: HFSink, layout: ModelLayout) -> None:
        self.sink, self.layout = sink, layout

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        return list(names)  # the HF files keep the model's order

    def write(self, name: str, tensors: Sequence[torch.Tensor]) -> None:
        """Add the HF tensors of our parameter ``name`` to the shards."""
        if self.layout.config.value_head and name == "output_layer.weight":
            return  # a reward model: HF's sequence classifier has the score head and no lm_head
        for hf_name, tensor in zip(self.layout.rules[name][1], tensors):
            self.sink.add(hf_name, tensor)

    def finish(self) -> None:
        self.sink.finish()


