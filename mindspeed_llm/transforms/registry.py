"""The run's model transforms, built from the flags: every registered transform asked for, in registration order.

The built-in transforms register themselves when their modules are imported below; a new one (FP8 linears,
quantised experts) adds its module with a :func:`~mindspeed_llm.transforms.base.register_transform` call and
one import line here. Nothing else changes: the trainer and the runtime iterate what :func:`build_transforms`
returns.
"""
from __future__ import annotations

import argparse
import functools
from typing import Dict, List

import torch
from torch import nn

from core.models.gpt_model import GPTModel, layout_state
from core.transformer.config import TransformerConfig
from mindspeed_llm.transforms import dsa_warmup, fp8, lora, qlora  # noqa: F401  (the built-ins register themselves)
from mindspeed_llm.transforms.base import REGISTRY, ModelTransform, TransformEntry


def whole_meta_model(config: TransformerConfig) -> nn.Module:
    """The whole model on the meta device, in one process (what a transform's checks look at)."""
    with torch.device("meta"):
        return GPTModel(config, layout_state())


def build_transforms(args: argparse.Namespace, config: TransformerConfig) -> List[ModelTransform]:
    """The transforms the flags ask for, checked (ArgumentError: one line); before any process group.

    A transform that stands in for others (``replaces``) is asked first, so that those are never built."""
    built: Dict[str, ModelTransform] = {}
    for entry in reversed(REGISTRY):
        if any(entry.name in _entry(name).replaces for name in built):
            continue
        transform = entry.factory(args)
        if transform is not None:
            built[entry.name] = transform
    transforms = [built[entry.name] for entry in REGISTRY if entry.name in built]
    meta_model = functools.lru_cache(maxsize=None)(lambda: whole_meta_model(config))
    for transform in transforms:
        transform.check(args, meta_model)
    return transforms


def _entry(name: str) -> TransformEntry:
    return next(entry for entry in REGISTRY if entry.name == name)
