"""DeepSeek-V3.2's dense warm-up stage as a model transform: ``--dsa-dense-warmup``.

In the warm-up the model's attention stays dense (``core/transformer/mla.py`` reads the same flag) and only the
lightning indexers train, against the KL divergence to the main attention's distribution over every causal key
(``--dsa-indexer-loss-coeff``). The transform's build hook freezes every other parameter on the meta device:
they get no gradient buffer and no optimizer state, and the optimizer's weight decay cannot move them. The
run's checkpoints hold every parameter, so the sparse stage starts from one with ``--load DIR --finetune`` (or
``--no-load-optim``, the optimizer's state covering the indexers only) and without the flag.
"""
from __future__ import annotations

import argparse
from typing import Callable, Optional

from torch import nn

from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.transforms.base import ModelTransform, register_transform

INDEXER = ".indexer."  # the indexers' parameter names contain this (self_attention.indexer.*)


def is_indexer_parameter(name: str) -> bool:
    return INDEXER in f".{name}"


class DsaDenseWarmup(ModelTransform):
    """Freeze every parameter but the DSA indexers' (V3.2's warm-up: dense attention, the indexers learn)."""

    name = "dsa_dense_warmup"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Optional["DsaDenseWarmup"]:
        return cls() if getattr(args, "dsa_dense_warmup", False) else None

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        if not any(is_indexer_parameter(name) for name, _ in meta_model().named_parameters()):
            raise ArgumentError("--dsa-dense-warmup trains the DSA indexers, and the model has none: add "
                                "--experimental-attention-variant dsa or drop the flag")

    def on_meta_model(self, model: nn.Module) -> None:
        for name, param in model.named_parameters():
            param.requires_grad_(is_indexer_parameter(name))


register_transform(DsaDenseWarmup.name, DsaDenseWarmup.from_args)
