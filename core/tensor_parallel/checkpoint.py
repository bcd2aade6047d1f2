"""Activation recompute: run part of the forward without keeping its activations.

Two tools, both exact (the backward sees bit-identical recomputed tensors):

* :func:`checkpoint` keeps only the inputs of ``function(*args)``; the backward
  runs the function again. It is ``torch.utils.checkpoint`` (non-reentrant)
  with the dropout RNG restored by this module: the default CPU and device
  generators *and* the tensor-parallel tracker's states
  (:func:`core.tensor_parallel.random.get_dropout_rng_states`), which
  ``torch.utils.checkpoint`` does not know. Being non-reentrant, the recomputed
  forward is matched tensor by tensor to the original graph: collectives inside
  it (sequence parallelism) run again in the same order on every rank, inputs
  that arrive from a pipeline ``recv`` keep their gradients, and the linear
  layers' weight-gradient deferral (zero-bubble, ``defer_weight_grads``) sees
  the recomputed products because the store is active in the backward too.
* :func:`recompute_activation` (MindSpeed's ``--recompute-activation-function``)
  computes ``consumer(activation(x))`` while storing neither the activation's
  internals nor its output: the consumer's saved copy of the output is replaced
  by a recipe and recomputed from ``x`` when the consumer's backward unpacks it.

:func:`inside_checkpoint` tells layers that a surrounding :func:`checkpoint`
already recomputes them, so they skip their own (finer) recompute.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, List, Tuple

import torch
import torch.utils.checkpoint

from core.tensor_parallel.random import get_dropout_rng_states, set_dropout_rng_states

_depth = 0  # > 0 while a checkpointed function runs (its forward or its recomputation)


def inside_checkpoint() -> bool:
    """True while the code runs inside :func:`checkpoint` (forward or recomputation)."""
    return _depth > 0


@contextlib.contextmanager
def _inside() -> Iterator[None]:
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


@contextlib.contextmanager
def _record_rng(snapshot: List[Any]) -> Iterator[None]:
    """The original forward: remember the dropout RNG states it starts from."""
    snapshot.append(get_dropout_rng_states())
    with _inside():
        yield


@contextlib.contextmanager
def _replay_rng(snapshot: List[Any]) -> Iterator[None]:
    """The recomputation: start from the forward's RNG states, then put the backward's back."""
    current = get_dropout_rng_states()
    set_dropout_rng_states(snapshot[0])
    try:
        with _inside():
            yield
    finally:
        set_dropout_rng_states(current)


def checkpoint(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, keeping only the inputs; the backward recomputes the rest with the same RNG."""
    snapshot: List[Any] = []
    return torch.utils.checkpoint.checkpoint(
        function, *args, use_reentrant=False, preserve_rng_state=False,
        context_fn=lambda: (_record_rng(snapshot), _replay_rng(snapshot)))


class _ActivationWithoutSavedOutputs(torch.autograd.Function):
    """``activation(x)`` that saves only ``x``; the backward recomputes the activation's graph."""

    @staticmethod
    def forward(ctx, activation: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        ctx.activation = activation
        ctx.save_for_backward(x)
        with torch.no_grad():
            return activation(x)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> Tuple[None, torch.Tensor]:
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            out = ctx.activation(leaf)
        (grad_x,) = torch.autograd.grad(out, leaf, grad_output)
        return None, grad_x


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.device == b.device and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def recompute_activation(activation: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                         consumer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``consumer(activation(x))`` with the activation output recomputed from ``x`` in the backward.

    ``activation`` must be deterministic (no dropout). Any tensor the consumer
    saves that lives in the activation output's storage (the output itself or a
    view, e.g. the input of a linear layer's weight gradient) is stored as a
    recipe instead and rebuilt, with its original view geometry, on unpack.
    """
    if not torch.is_grad_enabled():
        return consumer(activation(x))
    out = _ActivationWithoutSavedOutputs.apply(activation, x)  # same layout as activation(x)

    def pack(saved: torch.Tensor) -> Any:
        if _same_storage(saved, out):
            return ("recompute", saved.size(), saved.stride(), saved.storage_offset() - out.storage_offset())
        return saved

    def unpack(packed: Any) -> torch.Tensor:
        if not isinstance(packed, tuple):
            return packed
        _, size, stride, offset = packed
        with torch.no_grad():
            rebuilt = activation(x)
        return rebuilt.as_strided(size, stride, rebuilt.storage_offset() + offset)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return consumer(out)
