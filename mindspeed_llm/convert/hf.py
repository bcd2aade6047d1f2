"""Hugging Face checkpoints: ``config.json`` plus ``model.safetensors`` or an index of shards.

:class:`HFSource` reads the HF tensors our parameters need (the registry's weight map names them);
:class:`HFSink` writes safetensors shards of at most ``--max-shard-size``, ``config.json`` last.
"""
from __future__ import annotations

import dataclasses
import json
import os
import math
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from safetensors import SafetensorError, safe_open

from core.transformer.config import TransformerConfig
from mindspeed_llm.convert.errors import ConversionError, check_shape
from mindspeed_llm.convert.files import HF_CONFIG, SAFETENSORS_INDEX, SAFETENSORS_SINGLE, write_json
from mindspeed_llm.convert.layout import ModelLayout
from mindspeed_llm.convert.quantized import (FP8_EXPORT_CONFIG, FP8_SCALE_SUFFIX, dequantize, fp8_exported,
                                             fp8_scale_shape, plan_dequantization, quantize_fp8_blocks)
from mindspeed_llm.models.registry import (IGNORED_HF_TENSORS, Family, RegistryError, family_for_hf_config,
                                           find_rule, get_family, quantization_method, to_ours)

@dataclasses.dataclass(frozen=True)
class MultimodalText:
    """Where the text model of a multimodal checkpoint sits: its family, the prefix of its tensors (read as the
    text model's ``model.``) and the prefixes of the towers and projectors the converter leaves out."""

    text_family: str
    text_prefix: str
    left_out: Tuple[str, ...]


# Multimodal checkpoints (``model_type`` of config.json) whose language model is a registered text family: the
# converter reads ``text_config`` and the text tensors and leaves the vision tower out; its export is the text model
MULTIMODAL_TEXT_MODELS: Dict[str, MultimodalText] = {
    "qwen3_5": MultimodalText("qwen3_5_text", "model.language_model.", ("model.visual.",)),
    "qwen3_5_moe": MultimodalText("qwen3_5_moe_text", "model.language_model.", ("model.visual.",)),
}


def text_model_config(hf_config: Dict[str, Any], where: str) -> Tuple[Dict[str, Any], Optional[MultimodalText]]:
    """``config.json`` of the text model, and where its tensors sit (None: not a multimodal checkpoint).

    A multimodal config's ``text_config`` with the text family's ``model_type``; its outer
    ``tie_word_embeddings`` (what ``*ForConditionalGeneration`` ties) wins, and must not contradict the inner one.
    """
    multimodal = MULTIMODAL_TEXT_MODELS.get(hf_config.get("model_type"))
    if multimodal is None:
        return hf_config, None
    text = hf_config.get("text_config")
    if not isinstance(text, dict):
        raise ConversionError(f"{where}: model_type {hf_config['model_type']!r} is multimodal but has no text_config; "
                              "restore the file")
    outer, inner = hf_config.get("tie_word_embeddings"), text.get("tie_word_embeddings")
    if outer is not None and inner is not None and bool(outer) != bool(inner):
        raise ConversionError(f"{where}: tie_word_embeddings is {outer} but text_config says {inner}; make them agree")
    tied = {"tie_word_embeddings": outer} if outer is not None else {}
    return {**text, **tied, "model_type": get_family(multimodal.text_family).model_type}, multimodal


class HFSource:
    """Reads HF tensors from ``model.safetensors`` or an index of shards, one tensor at a time.

    A shard is opened (memory-mapped) only for the read of one tensor and closed after it, so the
    pages read do not stay in this process's resident memory.
    """

    def __init__(self, load_dir: str, family_name: Optional[str]) -> None:
        self.load_dir = load_dir
        config_path = os.path.join(load_dir, HF_CONFIG)
        self.hf_config, self.multimodal = text_model_config(read_hf_config(load_dir), config_path)
        self.family: Family = resolve_family(family_name, self.hf_config, config_path)
        self.family_name = self.family.name
        try:
            self.config = TransformerConfig(**self.family.to_config(self.hf_config))
        except (RegistryError, ValueError) as error:
            raise ConversionError(f"{os.path.join(load_dir, HF_CONFIG)}: {error}") from None
        self.where, self.shapes = self._index()
        self._plan_dequantization()
        self._drop_absent_mtp_layers()
        if self.multimodal is not None:
            print(f"convert_ckpt: note: {config_path} is multimodal; converting its text model "
                  f"({self.multimodal.text_prefix}*) as {self.family_name}", file=sys.stderr)
        if self.left_out_count:
            print(f"convert_ckpt: note: leaving out {self.left_out_count} tensor(s) of "
                  f"{', '.join(p + '*' for p in self._left_out_prefixes())}, which {self.family.architecture} "
                  "does not load either", file=sys.stderr)

    def _left_out_prefixes(self) -> Tuple[str, ...]:
        """The prefixes of the tensors no parameter reads: a multimodal checkpoint's towers, the family's unloaded
        ones (Qwen3-Next's MTP layer)."""
        towers = self.multimodal.left_out if self.multimodal is not None else ()
        return towers + self.family.unloaded_prefixes(self.hf_config)

    def _plan_dequantization(self) -> None:
        """A quantised checkpoint (``quantization_config``): each quantised weight is listed under the name the
        weight map knows, with its dequantised shape, and read from its stored values and scales
        (:mod:`mindspeed_llm.convert.quantized`); an 8-bit tensor without its scale is refused."""
        method = quantization_method(self.hf_config)
        self.dequantized = plan_dequantization(method, self.shapes, self.dtypes)
        self.stored_where = dict(self.where)  # the stored tensors' files, scales included
        for name, entry in self.dequantized.items():
            for source in entry.sources:
                self.where.pop(source, None)
                self.shapes.pop(source, None)
            self.where[name], self.shapes[name] = self.stored_where[entry.sources[0]], entry.shape
            self.dtypes[name] = "F32"
        for name in self.where:
            if self.dtypes[name] not in TORCH_DTYPES or self.dtypes[name].startswith("F8_"):
                raise ConversionError(f"tensor {name!r} in {self.listing} is stored as {self.dtypes[name]} without the "
                                      "scales that make it a weight (quantization_config "
                                      f"{self.hf_config.get('quantization_config')!r}); convert a bf16 copy")
        if self.dequantized:
            print(f"convert_ckpt: note: dequantising {len(self.dequantized)} {method} "
                  f"tensor(s) of {self.listing} to fp32", file=sys.stderr)

    def _drop_absent_mtp_layers(self) -> None:
        """A config.json with MTP layers (``num_nextn_predict_layers``) over weights without them (transformers
        drops them when it saves DeepSeek-V3, GLM-4.5 or DeepSeek-V4): convert the model transformers sees, without
        MTP. Where the first module's tensors live comes from the family's weight map."""
        depth = self.config.mtp_num_layers
        if not depth:
            return
        _, names = find_rule(self.family.rules(self.config), "mtp.layers.0.enorm.weight")
        if any(name in self.where for name in names):
            return
        print(f"convert_ckpt: note: {self.load_dir} has no tensors of its {depth} MTP layer(s) "
              f"({names[0].rsplit('.', 2)[0]}.*); converting without multi-token prediction", file=sys.stderr)
        # the family's reading of the config without MTP (fields only the MTP layers use go too: V4's sliding base)
        self.config = TransformerConfig(**self.family.to_config({**self.hf_config, "num_nextn_predict_layers": 0}))

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
        self.dtypes: Dict[str, str] = {}  # tensor name -> safetensors dtype (F32, BF16, ...)
        for file in files:
            path = os.path.join(self.load_dir, file)
            if not os.path.isfile(path):
                raise ConversionError(f"{index_path} (family {self.family_name}) lists shard {file}, which is "
                                      f"missing from {self.load_dir}; copy the complete checkpoint")
            try:
                with safe_open(path, framework="pt") as handle:
                    for name in handle.keys():
                        piece = handle.get_slice(name)
                        where[name], shapes[name] = path, tuple(piece.get_shape())
                        self.dtypes[name] = piece.get_dtype()
            except (SafetensorError, OSError) as error:
                raise ConversionError(f"{path} is truncated or not a safetensors file ({error}); copy the complete "
                                      "checkpoint again") from None
        if weight_map is not None:  # trust the index only where the shard agrees
            where = {name: os.path.join(self.load_dir, file) for name, file in weight_map.items()
                     if where.get(name) == os.path.join(self.load_dir, file)}
        self.file_names: Dict[str, str] = {}
        self.left_out_count = 0
        return self._canonical_names(*self._loaded_names(where, shapes))

    def _loaded_names(self, where: Dict[str, str], shapes: Dict[str, Tuple[int, ...]]
                      ) -> Tuple[Dict[str, str], Dict[str, Tuple[int, ...]]]:
        """The index without the tensors no parameter reads (counted in ``left_out_count``), a multimodal
        checkpoint's text tensors under the text model's names (``model.language_model.x`` -> ``model.x``)."""
        left_out, prefix = self._left_out_prefixes(), self.multimodal.text_prefix if self.multimodal else None
        kept_where: Dict[str, str] = {}
        kept_shapes: Dict[str, Tuple[int, ...]] = {}
        for name, path in where.items():
            if left_out and name.startswith(left_out):
                self.left_out_count += 1
                continue
            text_name = "model." + name[len(prefix):] if prefix and name.startswith(prefix) else name
            kept_where[text_name], kept_shapes[text_name] = path, shapes[name]
            self.dtypes[text_name] = self.dtypes.pop(name)
            if text_name != name:
                self.file_names[text_name] = name
        return kept_where, kept_shapes

    def _canonical_names(self, where: Dict[str, str], shapes: Dict[str, Tuple[int, ...]]
                         ) -> Tuple[Dict[str, str], Dict[str, Tuple[int, ...]]]:
        """The index under the weight map's names (``Family.hf_tensor_aliases``); ``file_names`` keeps each
        renamed tensor's name in its file."""
        renames = {name: self.family.canonical_hf_name(name) for name in where}
        for name, canonical in renames.items():
            if canonical == name:
                continue
            if canonical in where:
                raise ConversionError(f"{self.listing} holds both {name!r} and {canonical!r}, two spellings of one "
                                      f"{self.family_name} tensor; keep one")
            where[canonical], shapes[canonical] = where.pop(name), shapes.pop(name)
            self.dtypes[canonical] = self.dtypes.pop(name)
            self.file_names[canonical] = self.file_names.pop(name, name)
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
        """(the name in the file, the file) of HF tensor ``hf_name``, read for our ``name`` (a dequantised weight:
        its stored values)."""
        if hf_name in self.dequantized:
            hf_name = self.dequantized[hf_name].sources[0]
        return self.file_names.get(hf_name, hf_name), self.stored_where[hf_name]

    def describe(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """What :meth:`read` gives, on the meta device (from the shard headers)."""
        return [torch.empty(self.shapes[n], dtype=TORCH_DTYPES[self.dtypes[n]], device="meta") for n in hf_names]

    def read(self, name: str, hf_names: Sequence[str], layout: ModelLayout) -> List[torch.Tensor]:
        """The HF tensors ``hf_names`` of our parameter ``name``, read from their shards."""
        tensors = []
        for hf_name in hf_names:
            entry = self.dequantized.get(hf_name)
            if entry is None:
                tensors.append(self._stored(hf_name))
            else:
                tensors.append(dequantize(entry, [self._stored(source) for source in entry.sources], self.hf_config))
        return tensors

    def _stored(self, hf_name: str) -> torch.Tensor:
        """The tensor ``hf_name`` as its shard stores it."""
        path = self.stored_where[hf_name]
        try:
            with safe_open(path, framework="pt") as handle:
                return handle.get_tensor(self.file_names.get(hf_name, hf_name))
        except (SafetensorError, OSError) as error:
            raise ConversionError(f"{path}: tensor {hf_name!r} cannot be read ({error}); the file is truncated or "
                                  "damaged, copy the complete checkpoint again") from None


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
                      torch.uint8: "U8", torch.bool: "BOOL", torch.float8_e4m3fn: "F8_E4M3"}
TORCH_DTYPES = {name: dtype for dtype, name in SAFETENSORS_DTYPES.items()}


Planned = Tuple[str, torch.dtype, Tuple[int, ...]]  # (HF name, dtype, shape) of a tensor to write


class HFSink:
    """Writes HF tensors into safetensors shards of at most ``max_shard_size``, each straight to its place.

    The plan (every tensor's name, dtype and shape, in the order of the files) fixes the shards and their
    headers before any tensor arrives, so each tensor's bytes are written once, at their offset in the
    final file, in any order and from any thread (``os.pwrite``), and one tensor is in memory at a time. A
    shard is closed after its last tensor; ``config.json`` is written last.
    """

    def __init__(self, save_dir: str, max_shard_size: int, hf_config: Dict[str, Any],
                 plan: Sequence[Planned]) -> None:
        self.save_dir, self.hf_config = save_dir, hf_config
        shards = split_shards(plan, max_shard_size)
        count = len(shards)
        self.files = [SAFETENSORS_SINGLE if count == 1 else f"model-{number:05d}-of-{count:05d}.safetensors"
                      for number in range(1, count + 1)]
        self.headers: List[bytes] = []
        self.places: Dict[str, Tuple[int, int, Planned]] = {}  # HF name -> (shard, file offset, plan entry)
        for shard, entries in enumerate(shards):
            header, offsets = shard_header(entries)
            self.headers.append(header)
            for entry, offset in zip(entries, offsets):
                self.places[entry[0]] = (shard, 8 + len(header) + offset, entry)
        self.remaining = [len(entries) for entries in shards]  # tensors each shard still waits for
        self.total_size = sum(_nbytes(dtype, shape) for _, dtype, shape in plan)
        self.handles: Dict[int, int] = {}  # shard -> its open file descriptor

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Write ``tensor``'s bytes at their planned place (a shard is opened at its first tensor, closed after
        its last)."""
        shard, offset, (_, dtype, shape) = self.places[name]
        if tensor.dtype != dtype or tuple(tensor.shape) != shape:
            raise AssertionError(f"{name}: {tensor.dtype} {tuple(tensor.shape)} arrived, {dtype} {shape} planned")
        raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy()  # little-endian bytes
        _write_at(self._handle(shard), memoryview(raw), offset)
        self.remaining[shard] -= 1
        if not self.remaining[shard]:
            os.close(self.handles.pop(shard))

    def _handle(self, shard: int) -> int:
        """The open file of ``shard``, created with its header at its first use."""
        if shard not in self.handles:
            os.makedirs(self.save_dir, exist_ok=True)
            path = os.path.join(self.save_dir, self.files[shard])
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            header = self.headers[shard]
            _write_at(handle, memoryview(len(header).to_bytes(8, "little") + header), 0)
            self.handles[shard] = handle
        return self.handles[shard]

    def finish(self) -> None:
        """An empty model's one shard (its header only), the index of several shards, then config.json."""
        unwritten = [self.files[shard] for shard, left in enumerate(self.remaining) if left]
        if unwritten:
            raise AssertionError(f"shards {unwritten} never received all their tensors")
        if not self.places:
            os.close(self._handle(0))
            self.handles.pop(0)
        if len(self.files) > 1:
            weight_map = {name: self.files[shard] for name, (shard, _, _) in self.places.items()}
            index = {"metadata": {"total_size": self.total_size}, "weight_map": dict(sorted(weight_map.items()))}
            write_json(os.path.join(self.save_dir, SAFETENSORS_INDEX), index)
        write_json(os.path.join(self.save_dir, HF_CONFIG), self.hf_config)


def _nbytes(dtype: torch.dtype, shape: Sequence[int]) -> int:
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def split_shards(plan: Sequence[Planned], max_shard_size: int) -> List[List[Planned]]:
    """The plan cut into shards: a new shard when the next tensor would take the current one past
    ``max_shard_size`` (a tensor larger than that gets a shard of its own); one empty shard for no tensors."""
    shards: List[List[Planned]] = [[]]
    size = 0
    for entry in plan:
        nbytes = _nbytes(entry[1], entry[2])
        if shards[-1] and size + nbytes > max_shard_size:
            shards.append([])
            size = 0
        shards[-1].append(entry)
        size += nbytes
    return shards


def shard_header(entries: Sequence[Planned]) -> Tuple[bytes, List[int]]:
    """A shard's JSON header (padded with spaces to 8 bytes) and each tensor's offset in its data."""
    header: Dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offsets, position = [], 0
    for name, dtype, shape in entries:
        nbytes = _nbytes(dtype, shape)
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": list(shape),
                        "data_offsets": [position, position + nbytes]}
        offsets.append(position)
        position += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + b" " * (-len(text) % 8), offsets


def _write_at(handle: int, data: memoryview, offset: int) -> None:
    """All of ``data`` at ``offset`` of the open file ``handle`` (``pwrite`` may write less than asked)."""
    data = data.cast("B")
    while data:
        written = os.pwrite(handle, data, offset)
        data, offset = data[written:], offset + written


class HFWeightSink:
    """Adapts :class:`HFSink` to the per-parameter ``write`` interface: our parameters' HF tensors under the
    target's HF names (a reward model has HF's score head and no ``lm_head``)."""

    def __init__(self, directory: str, max_shard_size: int, hf_config: Dict[str, Any], layout: ModelLayout,
                 described: Sequence[Tuple[str, Sequence[torch.Tensor]]], fp8: bool = False) -> None:
        """``described``: (our target name, its HF tensors on the meta device) in the order they will come;
        ``fp8``: the linear weights in DeepSeek's block FP8 (``--save-hf-fp8``)."""
        self.layout, self.fp8 = layout, fp8
        plan: List[Planned] = []
        for name, metas in described:
            if self._kept(name):
                for hf_name, meta in zip(layout.rules[name][1], metas):
                    plan += self._planned(hf_name, meta.dtype, tuple(meta.shape))
        if fp8:
            hf_config = {**hf_config, "quantization_config": dict(FP8_EXPORT_CONFIG)}
        self.sink = HFSink(directory, max_shard_size, hf_config, plan)

    def _planned(self, hf_name: str, dtype: torch.dtype, shape: Tuple[int, ...]) -> List[Planned]:
        """The file entries of one HF tensor: itself, or its E4M3 values and block scales."""
        if not (self.fp8 and fp8_exported(hf_name, shape)):
            return [(hf_name, dtype, shape)]
        return [(hf_name, torch.float8_e4m3fn, shape), (hf_name + FP8_SCALE_SUFFIX, torch.float32,
                                                        fp8_scale_shape(shape))]

    def _kept(self, name: str) -> bool:
        """Whether our parameter ``name`` is written (a reward model's ``output_layer`` is not)."""
        return not (self.layout.config.value_head and name == "output_layer.weight")

    def order(self, names: Sequence[str], targets: Dict[str, str]) -> List[str]:
        """The model's order, which the HF files keep."""
        return list(names)

    def prepare(self, name: str, tensors: Sequence[torch.Tensor]) -> List[Tuple[str, torch.Tensor]]:
        """The HF tensors of our parameter ``name`` under the target's HF names, contiguous (none for a reward
        model's ``output_layer``)."""
        if not self._kept(name):
            return []
        prepared = []
        for hf_name, tensor in zip(self.layout.rules[name][1], tensors):
            if self.fp8 and fp8_exported(hf_name, tensor.shape):
                values, scale_inv = quantize_fp8_blocks(tensor)
                prepared += [(hf_name, values), (hf_name + FP8_SCALE_SUFFIX, scale_inv)]
            else:
                prepared.append((hf_name, tensor.contiguous()))
        return prepared

    def write(self, name: str, prepared: List[Tuple[str, torch.Tensor]]) -> None:
        """Add the :meth:`prepare` d tensors of ``name`` to the shards."""
        for hf_name, tensor in prepared:
            self.sink.add(hf_name, tensor)

    def finish(self) -> None:
        """Close the shards; the index and ``config.json`` last."""
        self.sink.finish()
