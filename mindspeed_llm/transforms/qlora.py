"""QLoRA as a model transform (LoRA over an NF4-stored base): ``--qlora``, ``--qlora-save-dequantize``.

``--qlora`` (with ``--lora-target-modules``, as MindSpeed-LLM's): once the base model is loaded
(its load hook, after ``--load`` and ``--lora-load``), the weight of every targeted column/row-parallel linear of
the decoder becomes an :class:`~core.quantization.nf4_linear.NF4Tensor` (this rank's shard, NF4 blocksize 64,
double quantisation with blocksize 256; ``core/quantization/nf4.py``), dequantised on the fly in the forward
and the backward. The adapters (fp32) read the layer's input and join its output as with LoRA. Then the task
attaches (DPO's reference is the same quantised base with the adapters switched off). A target that is not a
linear layer is refused in one line before any process group work.

Checkpoints. Without ``--qlora-save-dequantize`` ``--save`` writes the adapters (as LoRA; resumable with
``--load BASE --qlora --lora-load DIR``, which re-quantises the same base to the same bytes). MindSpeed-LLM's
``--qlora-save-dequantize`` saves the base as floating-point dequantised weights ``Q^-1(W_NF4)`` so that the
adapters can be merged into what they were trained against (merging them into the original ``W`` would
not be the trained model). Here the flag makes every ``--save`` write that merged model directly, as a plain
checkpoint of this suite (Megatron's layout, every parameter, the architecture record, no optimizer state and
no ``lora`` record): ``W = Q^-1(W_NF4) + (alpha / r) B A`` per targeted linear, each rank its own shard.
It loads with ``--load DIR --finetune`` (no LoRA flags) and converts to Hugging Face with
``tools/convert_ckpt.py`` like any other checkpoint; it does not resume the adapters (drop the flag for that).
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from torch import nn

from core import checkpointing
from core.quantization.nf4 import NF4_BLOCKSIZE, QuantizationError
from core.quantization.nf4_linear import (QUANTIZABLE_LINEARS, NF4Tensor, check_quantization_targets,
                                          dequantized_state_dict, quantize_linear_)
from core.tensor_parallel.lora import LORA_CLASSES, is_adapter
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.runtime import LoadedCheckpoint
from mindspeed_llm.transforms.base import TransformContext, register_transform
from mindspeed_llm.transforms.lora import LORA_RECORD, LoraTransform, lora_config_from_args


def check_qlora_targets(args: argparse.Namespace, model: nn.Module) -> None:
    """``--qlora``: every ``--lora-target-modules`` name is a linear layer of ``model`` (e.g. built on meta)."""
    if not args.qlora:
        return
    try:
        check_quantization_targets(model.decoder, args.lora_target_modules)
    except QuantizationError as error:
        raise ArgumentError(str(error)) from None


def quantize_base(models: Sequence[nn.Module], targets: Sequence[str]) -> List[str]:
    """The targeted linears of every chunk's decoder stored as NF4 (after loading); their names."""
    names = []
    for model in models:
        for name, module in model.decoder.named_modules(prefix="decoder"):
            if name.rsplit(".", 1)[-1] in targets and isinstance(module, QUANTIZABLE_LINEARS):
                quantize_linear_(module, NF4_BLOCKSIZE, double_quant=True)
                names.append(name)
    return names


def base_weight_bytes(models: Sequence[nn.Module]) -> int:
    """Bytes this rank's model weights take: parameters, buffers and NF4 storages."""
    total = 0
    for model in models:
        total += sum(p.numel() * p.element_size() for p in model.parameters())
        total += sum(b.numel() * b.element_size() for b in model.buffers())
        total += sum(m.weight.nbytes_stored() for m in model.modules()
                     if isinstance(getattr(m, "weight", None), NF4Tensor))
    return total


@torch.no_grad()
def merged_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """``model``'s state dict with each adapted weight replaced by ``Q^-1(W) + scaling B A`` (this rank's shard)
    and no adapter entries: the state dict of the plain (LoRA-free) model."""
    state = dequantized_state_dict(model)
    for name, module in model.named_modules():
        if type(module) not in LORA_CLASSES.values():
            continue
        key = f"{name}.weight"
        dense = state[key]
        delta = module.lora_B.weight.float() @ module.lora_A.weight.float() * module.lora_scaling  # [out(/tp), in(/tp)]
        state[key] = (dense.float() + delta).to(dense.dtype)
    return {key: value for key, value in state.items() if not is_adapter(key)}


def merged_model_state(models: Sequence[nn.Module]) -> Dict[str, Dict[str, torch.Tensor]]:
    """Megatron's ``model`` (or ``model0``, ...) entries of the merged model."""
    merged = [merged_state_dict(model) for model in models]
    if len(merged) == 1:
        return {"model": merged[0]}
    return {f"model{i}": state for i, state in enumerate(merged)}


def merged_checkpoint_payload(models: Sequence[nn.Module], payload: Dict[str, Any]) -> Dict[str, Any]:
    """``--qlora-save-dequantize``: the run's adapter checkpoint payload turned into the merged model's."""
    result = {key: value for key, value in payload.items()
              if key not in checkpointing.model_keys(payload) and key != LORA_RECORD}
    result.update(merged_model_state(models))  # no optimizer state: saves_optimizer is False
    return result


class QLoraTransform(LoraTransform):
    """QLoRA: LoRA's adapters and checkpoints, the targeted base linears stored as NF4 once the base (and the
    adapters) are loaded; with ``--qlora-save-dequantize`` every save writes the merged plain model instead."""

    name = "qlora"

    def __init__(self, config: Any, save_dequantized: bool) -> None:
        super().__init__(config)
        self.save_dequantized = save_dequantized
        self.saves_optimizer = not save_dequantized  # a merged model has no optimizer state

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Optional["QLoraTransform"]:
        config = lora_config_from_args(args) if args.qlora else None
        return None if config is None else cls(config, bool(args.qlora_save_dequantize))

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        check_qlora_targets(args, meta_model())  # linear layers only (its own message), before LoRA's rule
        super().check(args, meta_model)

    def save_state(self, payload: Dict[str, Any], models: Sequence[nn.Module]) -> Dict[str, Any]:
        payload = super().save_state(payload, models)
        return merged_checkpoint_payload(models, payload) if self.save_dequantized else payload

    def after_load(self, context: TransformContext) -> Optional[LoadedCheckpoint]:
        resume = super().after_load(context)
        quantize_base(context.models, context.args.lora_target_modules)  # before the task sees the model
        return resume


register_transform(QLoraTransform.name, QLoraTransform.from_args, replaces=(LoraTransform.name,))
