"""The conversion: open the source, lay out the target, then stream every tensor from one to the other
(read, NaN / Inf check, optional dtype cast, write) under a progress bar, into a staging directory that is
published at the end."""
from __future__ import annotations

import argparse
from typing import Dict, List, Sequence

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
from mindspeed_llm.convert.peft import LoraAdapters, write_peft_adapter
from mindspeed_llm.convert.reshard import layer_renaming, rename, target_layout
from mindspeed_llm.convert.torch_dist import DistSink, DistSource, dist_format
from mindspeed_llm.models.registry import RegistryError


def open_source(args: argparse.Namespace):
    """The reader of ``--load-dir`` in its format (an mg source in either ``--ckpt-format``)."""
    if args.load_model_type == "hf":
        return HFSource(args.load_dir, args.model_type_hf)
    if args.load_model_type == "megatron":
        return MegatronLMSource(args.load_dir, args.model_type_hf, args.vocab_size)
    found = source_iteration(args.load_dir)
    source = DistSource if dist_format.is_dist_checkpoint(iteration_dir(args.load_dir, *found)) else MegatronSource
    return source(args.load_dir, args.model_type_hf, found)


def open_sink(args: argparse.Namespace, source, source_layout: ModelLayout, layout: ModelLayout,
              targets: Dict[str, str], directory: str):
    """The writer of the target format (``layout``), into ``directory`` (the staging directory)."""
    if args.save_model_type == "mg" and args.ckpt_format == "torch_dist":
        return DistSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "mg":
        return MegatronSink(directory, layout, source.family_name, source.hf_config)
    if args.save_model_type == "megatron":
        return MegatronLMSink(directory, layout, source.family_name, source.hf_config,
                              args.transformer_impl or "local")
    try:
        hf_config = source.family.to_hf_config(layout.config, source.hf_config)
    except RegistryError as error:
        raise ConversionError(f"{args.load_dir}: {error}") from None
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    described = [(targets[name], [meta.to(dtype) if dtype else meta
                                  for meta in source.describe(name, source_layout.rules[name][1], source_layout)])
                 for name in source_layout.names]  # (the HF sink's order: the model's)
    return HFWeightSink(directory, parse_size(args.max_shard_size), hf_config, layout, described)


def convert(args: argparse.Namespace) -> None:
    """Convert ``--load-dir`` to ``--save-dir`` as the flags say; every input error is found before writing."""
    validate_args(args)
    source = open_source(args)
    adapters = LoraAdapters(args.lora_load, source.family_name) if args.lora_load else None
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
            write_peft_adapter(args, source, adapters, layout, renaming, staging)
        else:
            sink = open_sink(args, source, source_layout, layout, targets, staging)
            stream(args, source, source_layout, sink, targets)
        publish(staging, args.save_dir, target_kind(args))
    finally:
        remove_path(staging)


def stream(args: argparse.Namespace, source, layout: ModelLayout, sink, targets: Dict[str, str]) -> None:
    """Every tensor of the source (``layout``) read once, checked, cast and written to the sink (every target
    rank's piece) as ``targets`` names it."""
    dtype = DTYPES[args.params_dtype] if args.params_dtype else None
    names = sink.order(layout.names, targets)
    for name in tqdm(names, desc="converting", unit="tensor"):
        tensors = source.read(name, layout.rules[name][1], layout)
        check_finite(source, name, tensors, layout, args.allow_non_finite)
        if dtype is not None:
            tensors = cast(source, name, tensors, dtype, layout, args)
        sink.write(targets[name], tensors)
    sink.finish()


def check_finite(source, name: str, tensors: Sequence[torch.Tensor], layout: ModelLayout, allow: bool) -> None:
    """Refuse to export a tensor holding NaN / Inf (a diverged run's checkpoint), naming it and the source file;
    with ``--allow-non-finite`` warn and go on."""
    for hf_name, tensor in zip(layout.rules[name][1], tensors):
        bad = non_finite_count(tensor)
        if not bad:
            continue
        stored, path = source.locate(name, hf_name, layout)
        refuse_non_finite(f"tensor {stored!r} in {path} holds {bad} NaN/Inf value(s) of {tensor.numel()}",
                          NON_FINITE_FIX, allow)


def cast(source, name: str, tensors: Sequence[torch.Tensor], dtype: torch.dtype, layout: ModelLayout,
         args: argparse.Namespace) -> List[torch.Tensor]:
    """The tensors in ``--params-dtype``; values beyond its range (fp16's 65504) would become Inf: refused,
    naming the tensor, unless ``--allow-non-finite``."""
    result = []
    for hf_name, tensor in zip(layout.rules[name][1], tensors):
        converted = tensor.to(dtype)
        overflow = non_finite_count(converted) - non_finite_count(tensor)
        if overflow:
            stored, path = source.locate(name, hf_name, layout, finite=True)
            refuse_non_finite(f"--params-dtype {args.params_dtype}: {overflow} value(s) of tensor {stored!r} in "
                              f"{path} exceed {args.params_dtype}'s range (largest {torch.finfo(dtype).max:g}) and "
                              "would become Inf", "keep the checkpoint's dtype (drop --params-dtype) or use bf16",
                              args.allow_non_finite)
        result.append(converted)
    return result


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
