"""The conversion: open the source, lay out the target, then stream every tensor from one to the other
(read, NaN / Inf check, optional dtype cast and the target's split on worker threads; refusals and writes in
order) under a progress bar, into a staging directory that is published at the end."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, Deque, Dict, List, Optional, Tuple

import torch
from tqdm import tqdm

from core.checkpointing import iteration_dir, non_finite_count
from mindspeed_llm.convert.arguments import DTYPES, parse_size, validate_args
from mindspeed_llm.convert.errors import NON_FINITE_FIX, ConversionError, refuse_non_finite
from mindspeed_llm.convert.files import publish, remove_path, staging_dir, target_kind
from mindspeed_llm.convert.hf import HFSource, HFWeightSink
from mindspeed_llm.convert.layout import ModelLayout
from mindspeed_llm.convert.megatron import MegatronLMSink, MegatronLMSource
from mindspeed_llm.convert.native import MegatronSink, MegatronSource, source_iteration
from mindspeed_llm.convert.reshard import layer_renaming, rename, target_layout
from mindspeed_llm.models.registry import RegistryError


def open_source(args: argparse.Namespace):
    """The reader of ``--load-dir`` in its format (an mg source in either ``--ckpt-format``)."""
    if args.load_model_type == "hf":
        return HFSource(args.load_dir, args.model_type_hf)
    if args.load_model_type == "megatron":
        return MegatronLMSource(args.load_dir, args.model_type_hf, args.vocab_size)
    found = source_iteration(args.load_dir)
    directory = iteration_dir(args.load_dir, *found)
    if not any(name.startswith("mp_rank_") for name in os.listdir(directory)):  # perhaps torch_dist
        torch_dist = import_torch_dist()
        if torch_dist.dist_format.is_dist_checkpoint(directory):
            return torch_dist.DistSource(args.load_dir, args.model_type_hf, found)
    return MegatronSource(args.load_dir, args.model_type_hf, found)


def import_torch_dist() -> ModuleType:
    """:mod:`mindspeed_llm.convert.torch_dist`, imported for a torch_dist source or target only: it imports
    ``torch.distributed.checkpoint``, which takes seconds."""
    return importlib.import_module("mindspeed_llm.convert.torch_dist")


def import_peft() -> ModuleType:
    """:mod:`mindspeed_llm.convert.peft`, imported for ``--lora-load`` only: it imports the post-training
    package, which imports every task (and with them FSDP and DTensor)."""
    return importlib.import_module("mindspeed_llm.convert.peft")


def open_sink(args: argparse.Namespace, source, source_layout: ModelLayout, layout: ModelLayout,
              targets: Dict[str, str], directory: str):
    """The writer of the target format (``layout``), into ``directory`` (the staging directory)."""
    if args.save_model_type == "mg" and args.ckpt_format == "torch_dist":
        return import_torch_dist().DistSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "mg":
        return MegatronSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "megatron":
        return MegatronLMSink(directory, layout, source.family_name, source.hf_config,
                              args.transformer_impl or "local", args.moe_grouped_gemm, args.megatron_mtp_layer_name)
    try:
        hf_config = source.family.to_hf_config(layout.config, source.hf_config)
    except RegistryError as error:
        raise ConversionError(f"{args.load_dir}: {error}") from None
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    described = [(targets[name], [meta.to(dtype) if dtype else meta
                                  for meta in source.describe(name, source_layout.rules[name][1], source_layout)])
                 for name in source_layout.names]  # (the HF sink's order: the model's)
    return HFWeightSink(directory, parse_size(args.max_shard_size), hf_config, layout, described, args.save_hf_fp8)


def convert(args: argparse.Namespace) -> None:
    """Convert ``--load-dir`` to ``--save-dir`` as the flags say; every input error is found before writing."""
    validate_args(args)
    source = open_source(args)
    adapters = import_peft().LoraAdapters(args.lora_load, source.family_name) if args.lora_load else None
    if adapters is not None:
        adapters.attach(source)  # before the layouts: a reward model's adapters add the value head
    rules = source.family.rules(source.config)
    source_layout = ModelLayout(source.config, rules, getattr(source, "placement", None))
    layout = target_layout(args, source, rules)
    source.check(source_layout)
    renaming = layer_renaming(source.config, layout.config)
    targets = {name: rename(name, renaming) for name in source_layout.names}
    if sorted(targets.values()) != sorted(layout.names):  # same flags on both sides: cannot differ
        raise AssertionError("source and target parameters differ")
    if adapters is not None:
        adapters.check_base(source_layout, args.lora_load)
    staging = staging_dir(args.save_dir)
    remove_path(staging)
    try:
        if adapters is not None and args.save_lora_to_hf:
            import_peft().write_peft_adapter(args, source, adapters, layout, renaming, staging)
        else:
            sink = open_sink(args, source, source_layout, layout, targets, staging)
            stream(args, source, source_layout, sink, targets)
        publish(staging, args.save_dir, target_kind(args))
    finally:
        remove_path(staging)


AHEAD = 2  # worker threads reading and preparing tensors ahead of the one being written
AHEAD_ELEMENTS = 48 * 2**20  # ... while the tensors in flight hold fewer elements (memory: ~100 MB in bf16)


@dataclasses.dataclass
class Loaded:
    """A source parameter read, counted, cast and prepared by the sink, on a worker thread (:func:`load`)."""

    bad: List[int]  # NaN / Inf values per HF tensor
    overflow: List[int]  # values the --params-dtype cast made Inf, per HF tensor
    sizes: List[int]  # elements per HF tensor
    prepared: Any = None  # the sink's pieces
    error: Optional[ConversionError] = None  # what preparing them raised, reported after the counts


def stream(args: argparse.Namespace, source, layout: ModelLayout, sink, targets: Dict[str, str]) -> None:
    """Every tensor of the source (``layout``) read once, checked, cast and made into the target's pieces on a
    worker thread (:func:`load`, ahead as :data:`AHEAD` and :data:`AHEAD_ELEMENTS` allow, so that reading,
    joining and splitting overlap the writes), then reported and written in order on this thread
    (:func:`commit`)."""
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    names = sink.order(layout.names, targets)
    pending: Deque[Tuple[str, Future]] = deque()
    in_flight = 0  # elements of the pending tensors
    with ThreadPoolExecutor(max_workers=AHEAD) as pool, \
            tqdm(total=len(names), desc="converting", unit="tensor") as progress:
        try:
            for position, name in enumerate(names):
                pending.append((name, pool.submit(load, source, layout, sink, name, targets[name], dtype)))
                in_flight += math.prod(layout.full_shapes[name])
                last = position == len(names) - 1
                while pending and (last or len(pending) > AHEAD or in_flight > AHEAD_ELEMENTS):
                    name_done, loaded = pending.popleft()
                    in_flight -= math.prod(layout.full_shapes[name_done])
                    commit(args, source, layout, sink, name_done, targets[name_done], loaded.result())
                    progress.update()
        finally:
            for _, future in pending:  # a refusal: what was read ahead is not needed
                future.cancel()
    sink.finish()


def load(source, layout: ModelLayout, sink, name: str, target: str, dtype: Optional[torch.dtype]) -> Loaded:
    """Source parameter ``name`` read, its NaN / Inf counted, cast to ``dtype`` and prepared by the sink as
    ``target``: a worker thread's part, which reports nothing."""
    tensors = source.read(name, layout.rules[name][1], layout)
    bad = [non_finite_count(tensor) for tensor in tensors]
    loaded = Loaded(bad, [0] * len(tensors), [tensor.numel() for tensor in tensors])
    if dtype is not None:
        tensors = [tensor.to(dtype) for tensor in tensors]
        loaded.overflow = [non_finite_count(tensor) - count for tensor, count in zip(tensors, bad)]
    try:
        loaded.prepared = sink.prepare(target, tensors)
    except ConversionError as error:  # raised by commit, after this tensor's own refusals, as in order
        loaded.error = error
    return loaded


def commit(args: argparse.Namespace, source, layout: ModelLayout, sink, name: str, target: str,
           loaded: Loaded) -> None:
    """Refuse (or, with ``--allow-non-finite``, warn about) source parameter ``name``'s NaN / Inf values and
    ``--params-dtype`` overflows, naming the tensor and its file; then write its pieces as ``target``."""
    hf_names = layout.rules[name][1]
    for hf_name, count, size in zip(hf_names, loaded.bad, loaded.sizes):
        if count:
            stored, path = source.locate(name, hf_name, layout)
            refuse_non_finite(f"tensor {stored!r} in {path} holds {count} NaN/Inf value(s) of {size}",
                              NON_FINITE_FIX, args.allow_non_finite)
    for hf_name, count in zip(hf_names, loaded.overflow):
        if count:
            largest = torch.finfo(DTYPES[args.params_dtype]).max
            stored, path = source.locate(name, hf_name, layout, finite=True)
            refuse_non_finite(f"--params-dtype {args.params_dtype}: {count} value(s) of tensor {stored!r} in {path} "
                              f"exceed {args.params_dtype}'s range (largest {largest:g}) and would become Inf",
                              "keep the checkpoint's dtype (drop --params-dtype) or use bf16", args.allow_non_finite)
    if loaded.error is not None:
        raise loaded.error
    sink.write(target, loaded.prepared)


GLIBC_M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)


def return_large_frees_to_the_os(threshold: int = 2**20) -> None:
    """Serve every allocation of ``threshold`` bytes or more with its own mapping (glibc's
    ``M_MMAP_THRESHOLD``), so that a freed tensor goes back to the OS at once.

    By default glibc raises that threshold up to 32 MiB after the first large free, and the
    freed tensors below it (shards, fused pieces) then stay in the heap: resident memory creeps
    up over a conversion (TinyLlama's shape: peak RSS 0.58 GB instead of 0.42 GB). Elsewhere
    than glibc this does nothing.
    """
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").mallopt(GLIBC_M_MMAP_THRESHOLD, threshold)
    except (OSError, AttributeError):
        pass
