"""LoRA adapters (``--lora-load``, a LoRA run's ``--save``) over an mg base: merged into what the source reads
(``W + alpha/r B A``), or, with ``--save-lora-to-hf``, written alone in PEFT's files
(``mindspeed_llm/transforms/peft_format.py``)."""
from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Dict

import torch

from core.checkpointing import non_finite_count
from core.models.gpt_model import GPTModel, layout_state
from core.tensor_parallel.lora import LoraConfig, add_lora, is_adapter
from core.tensor_parallel.param_meta import param_meta
from mindspeed_llm.convert.errors import NON_FINITE_FIX, ConversionError, refuse_non_finite
from mindspeed_llm.convert.layout import ModelLayout
from mindspeed_llm.convert.native import MegatronSource
from mindspeed_llm.convert.reshard import rename
from mindspeed_llm.models.registry import VALUE_HEAD_RULE, to_hf
from mindspeed_llm.transforms import peft_format

class LoraAdapters:
    """An adapter checkpoint (``--lora-load DIR``, as a LoRA run's ``--save`` writes it) read whole: its
    ``lora`` record and the full tensors of its adapters (and modules to save) under our names.

    Its own layout (TP, PP, VPP) comes from its ``args`` as for any mg source; each piece is joined with
    the shard spec of the adapter in a model built like training's (``add_lora`` on the meta device).

    A reward model's adapters (``--stage orm``) hold the value head it trained (``value_head.weight``, always
    trainable under LoRA) while their base is the language model it started from: :meth:`attach` then makes
    the source that reward model (``value_head`` on, the head read from here), so it exports as HF's
    ``...ForSequenceClassification`` (or a plain mg reward model), as a fully trained one does.
    """

    def __init__(self, lora_dir: str, family_name: str) -> None:
        source = MegatronSource(lora_dir, family_name)
        first = source._map(0, 0)
        record, saved_args = first.get("lora"), first.get("args")
        if not isinstance(record, dict):
            raise ConversionError(f"--lora-load {lora_dir} holds no LoRA adapters (no 'lora' entry); pass a "
                                  "checkpoint saved by a run with --lora-target-modules")
        self.config = LoraConfig(r=int(record["r"]), alpha=float(record["alpha"]),
                                 dropout=float(getattr(saved_args, "lora_dropout", None) or 0.0),
                                 target_modules=tuple(record["target_modules"]),
                                 modules_to_save=tuple(record.get("modules_to_save") or ()),
                                 module_ranks=tuple(sorted((record.get("module_ranks") or {}).items())))
        with torch.device("meta"):
            model = GPTModel(source.config, layout_state(source.tp))
        add_lora(model, self.config)
        shards = {name: param_meta(param).tp_shard for name, param in model.named_parameters() if param.requires_grad}
        self.tensors: Dict[str, torch.Tensor] = {}
        for (rank, stage, chunk), shapes in sorted(source.shapes.items()):
            key = "model" if len(source.placement[0]) == 1 else f"model{chunk}"
            for name in shapes if rank == 0 else ():
                if name not in shards:  # the last stage's copy of tied embeddings
                    continue
                holders = range(source.tp) if shards[name] is not None else range(1)
                pieces = [source._map(holder, stage)[key][name] for holder in holders]
                self.tensors[name] = shards[name].unshard(pieces) if shards[name] is not None else pieces[0]
        missing = sorted(set(shards) - set(self.tensors))
        if missing:
            raise ConversionError(f"--lora-load {lora_dir} lacks {missing[0]}; the checkpoint is incomplete")
        self.reward_model = VALUE_HEAD_RULE.ours in self.tensors  # trained with --stage orm

    def attach(self, source: MegatronSource) -> None:
        """Merge into what ``source`` reads; a reward model's adapters over a language model turn the source
        into that reward model (its config's ``value_head`` on, the head supplied by the adapters)."""
        if self.reward_model and not source.config.value_head:
            source.config = dataclasses.replace(source.config, value_head=True)
            source.supplied = frozenset({VALUE_HEAD_RULE.ours})
        source.overlay = self.merged

    def check_base(self, layout: ModelLayout, lora_dir: str) -> None:
        """Every adapter and module to save fits the base model's weight."""
        for name, tensor in self.tensors.items():
            module, factor = name.rsplit(".", 2)[:2] if is_adapter(name) else (None, None)
            weight = f"{module}.weight" if module else name
            if weight not in layout.full_shapes:  # (a reward model's value head is supplied: see attach)
                raise ConversionError(f"--lora-load {lora_dir}: {name} needs {weight}, which the --load-dir model "
                                      f"({layout.config.num_layers} layers) lacks; the adapters were trained on "
                                      "another model")
            out, into = layout.full_shapes[weight][0], layout.full_shapes[weight][-1]
            expected = {None: layout.full_shapes[weight], "lora_A": (tensor.shape[0], into),
                        "lora_B": (out, tensor.shape[-1])}[factor]  # A [rank, in], B [out, rank]
            if tuple(tensor.shape) != tuple(expected):
                raise ConversionError(f"--lora-load {lora_dir}: {name} is {tuple(tensor.shape)}, the base weight "
                                      f"{weight} is {layout.full_shapes[weight]}; the adapters were trained on "
                                      "another model")

    def merged(self, name: str, full: torch.Tensor) -> torch.Tensor:
        """Base tensor ``name`` (full, our layout) with the adapters merged: ``W + alpha/r B A`` in fp32, a
        module to save replaced by its trained copy."""
        if name in self.tensors:  # (``full`` None: a tensor the base lacks, the reward model's value head)
            return self.tensors[name] if full is None else self.tensors[name].to(full.dtype)
        module = name[:-len(".weight")]
        a, b = self.tensors.get(f"{module}.lora_A.weight"), self.tensors.get(f"{module}.lora_B.weight")
        if a is None or b is None:
            return full
        delta = self.config.scaling * (b.float() @ a.float())  # [out, r] @ [r, in] -> [out, in]
        return (full.float() + delta).to(full.dtype)


def write_peft_adapter(args: argparse.Namespace, source: MegatronSource, adapters: LoraAdapters,
                       layout: ModelLayout, renaming: Dict[str, str], directory: str) -> None:
    """``--save-lora-to-hf``: the adapters in PEFT's files, per HF projection, with HF layer numbers."""
    if adapters.config.modules_to_save:
        raise ConversionError(f"--lora-load {args.lora_load} also trained "
                              f"{' '.join(adapters.config.modules_to_save)} (--lora-modules-to-save), which PEFT's "
                              "LoRA files do not hold here; drop --save-lora-to-hf to write the merged model")
    tensors = {rename(name, renaming): tensor for name, tensor in adapters.tensors.items()}
    for name, tensor in tensors.items():  # (no source read: the adapters are written as they are)
        bad = non_finite_count(tensor)
        if bad:
            refuse_non_finite(f"tensor {name!r} of --lora-load {args.lora_load} holds {bad} NaN/Inf value(s) of "
                              f"{tensor.numel()}", NON_FINITE_FIX, args.allow_non_finite)
    rule_of = layout.rules.__getitem__
    modules = peft_format.adapted_modules(tensors)
    try:
        peft_tensors = peft_format.to_peft(tensors, rule_of, layout.context)
        targets = peft_format.hf_targets(modules, rule_of)
        rank_pattern = {target: tensors[f"{module}.lora_A.weight"].shape[0] for module in modules
                        if tensors[f"{module}.lora_A.weight"].shape[0] != adapters.config.r
                        for target in peft_format.hf_targets([module], rule_of)}  # block-form modules
    except peft_format.PeftFormatError as error:
        raise ConversionError(f"--save-lora-to-hf (family {source.family_name}): {error}") from None
    if adapters.reward_model:  # a sequence classifier's adapter: the score head saved whole, as PEFT does
        head = VALUE_HEAD_RULE.ours
        for hf_name, tensor in zip(rule_of(head)[1], to_hf(rule_of(head)[0], tensors[head], layout.context(head))):
            peft_tensors[peft_format.module_key(hf_name)] = tensor.contiguous()
    base = (source.hf_config or {}).get("_name_or_path") or os.path.abspath(args.load_dir)
    config = peft_format.adapter_config(adapters.config.r, adapters.config.alpha, adapters.config.dropout, targets,
                                        base, rank_pattern, sequence_classifier=adapters.reward_model)
    peft_format.write(directory, peft_tensors, config)


