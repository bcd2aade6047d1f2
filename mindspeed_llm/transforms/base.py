"""The model-transform protocol and its registry (TorchTitan's model converters are the pattern).

A transform is built from the flags before any process group (:class:`TransformEntry`'s factory returns None
when its flags are absent) and then takes part in the model's life through five hooks, each a no-op by
default:

* :meth:`ModelTransform.check` (before any process group): refuse flags that cannot work, one line each;
* :meth:`ModelTransform.on_meta_model` (the build hook): change each model chunk on the meta device, before
  its weights are initialised (adapters attached there are initialised from ``--seed`` like the rest);
* :meth:`ModelTransform.save_state` and :meth:`ModelTransform.load_base` (the state-dict filter): what a
  checkpoint of the run holds, and how the ``--load`` checkpoint's weights go into the transformed model;
* :meth:`ModelTransform.after_load` (the load hook): after ``--load``, e.g. read the transform's own
  checkpoint or quantise the loaded base; it may name a checkpoint to resume the run's state from;
* :meth:`ModelTransform.dist_state` and :meth:`ModelTransform.load_dist_state` (the same for
  ``--ckpt-format torch_dist``): tensors under layout-independent keys, saved with the weights;
* :meth:`ModelTransform.after_step` (the step hook): after each optimizer step, e.g. FP8's delayed scales.

A new transform registers with :func:`register_transform` from its own module and is listed in
``registry.py``; the trainer iterates the built transforms and never names one.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from core.parallel_state import ParallelState
from core.transformer.config import TransformerConfig
from mindspeed_llm.runtime import LoadedCheckpoint


@dataclass
class TransformContext:
    """What a load hook may use: the run's flags, config, layout and model chunks, and a way to tell the
    optimizer that the weights changed (``reload_weights``: the master copies re-read from the model)."""
    args: argparse.Namespace
    config: TransformerConfig
    state: ParallelState
    models: List[nn.Module]
    reload_weights: Callable[[], None]


class ModelTransform:
    """One change to the model, with what it saves and loads. Subclasses override the hooks they need."""

    name = "transform"
    freezes_base = False  # the base weights are frozen: the --load checkpoint is read as weights only
    trainable_state_only = False  # a checkpoint holds the trainable parameters only
    saves_optimizer = True  # False: the checkpoints this run writes have no optimizer state

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        """Refuse flags that cannot work (``meta_model()``: the whole model on the meta device, built once)."""

    def on_meta_model(self, model: nn.Module) -> None:
        """The build hook: change ``model`` (one chunk, on the meta device) before its weights are initialised."""

    def save_state(self, payload: Dict[str, Any], models: Sequence[nn.Module]) -> Dict[str, Any]:
        """The checkpoint payload this transform's run writes (model entries, its own records)."""
        return payload

    def load_base(self, models: Sequence[nn.Module], content: Dict[str, Any], path: str) -> bool:
        """Load the ``--load`` checkpoint's weights into ``models`` itself (True), or leave it to the trainer."""
        return False

    def after_load(self, context: TransformContext) -> Optional[LoadedCheckpoint]:
        """The load hook, after ``--load``: a checkpoint to resume the run's state from, or None."""
        return None

    def dist_state(self, models: Sequence[nn.Module]) -> Dict[str, torch.Tensor]:
        """What this transform keeps beside the weights, for ``--ckpt-format torch_dist``: whole tensors under
        layout-independent keys (every rank that holds one gives the same tensor under the same key). Saved with
        the weights; at a resume, the shapes of what to read back. {}: nothing."""
        return {}

    def load_dist_state(self, models: Sequence[nn.Module], loaded: Dict[str, torch.Tensor], path: str) -> None:
        """At a resume from ``path`` (torch_dist): the tensors of :meth:`dist_state`'s keys the checkpoint holds
        (a key it lacks is absent)."""

    def after_step(self, models: Sequence[nn.Module], state: ParallelState, applied: bool) -> None:
        """The step hook, after each training step's optimizer step (``applied``: the update was not skipped).
        Collective when it communicates: every rank calls it."""


Factory = Callable[[argparse.Namespace], Optional[ModelTransform]]


@dataclass(frozen=True)
class TransformEntry:
    """A registered transform: its name, the factory (None: not asked for by the flags) and the transforms it
    stands in for when it is built (a QLoRA run is a LoRA run with more to it)."""
    name: str
    factory: Factory
    replaces: Tuple[str, ...] = field(default=())


REGISTRY: List[TransformEntry] = []


def register_transform(name: str, factory: Factory, replaces: Sequence[str] = ()) -> None:
    """Add a transform to the registry (the hooks run in registration order); a name registers once."""
    if any(entry.name == name for entry in REGISTRY):
        raise ValueError(f"a model transform named {name!r} is registered already")
    REGISTRY.append(TransformEntry(name, factory, tuple(replaces)))


def unregister_transform(name: str) -> None:
    """Remove a registered transform (tests that plant one)."""
    REGISTRY[:] = [entry for entry in REGISTRY if entry.name != name]
