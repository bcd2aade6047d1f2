"""Activation recompute: run part of the forward without keeping its activations.

Two tools, both exact (the backward sees bit-identical recomputed tensors):

* :func:`checkpoint` keeps only the inputs of ``function(*args)``; the backward
  runs the function again and backpropagates through the recomputed graph (a
  re-entrant autograd function, as Megatron's). The recomputation starts from
  the forward's dropout RNG states: the default CPU and device generators *and*
  the tensor-parallel tracker's states
  (:func:`core.tensor_parallel.random.get_dropout_rng_states`), which
  ``torch.utils.checkpoint`` does not know. Collectives inside (sequence
  parallelism) run again in the same order on every rank; inputs that arrive
  from a pipeline ``recv`` get their gradients; and because the recomputed
  graph saves the parameters themselves, zero-bubble's weight-gradient
  deferral (``defer_weight_grads``, active in the backward too) queues them
  as usual. (``torch.utils.checkpoint``'s non-reentrant mode hands the backward
  detached copies of saved parameters, so the deferred entries would name no
  parameter.) Not for ``torch.autograd.grad`` through the region.
* :func:`recompute_activation` (MindSpeed's ``--recompute-activation-function``)
  computes ``consumer(activation(x))`` while storing neither the activation's
  internals nor its output: the output's storage is released after the
  consumer's forward and refilled from ``x`` just before the consumer's backward.

:func:`inside_checkpoint` tells layers that a surrounding :func:`checkpoint`
already recomputes them, so they skip their own (finer) recompute; :func:`is_recomputing`
tells them that this is the second run.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import torch

from core.tensor_parallel.random import get_dropout_rng_states, set_dropout_rng_states

_depth = 0  # > 0 while a checkpointed function runs (its forward or its recomputation)
_recomputing = 0  # > 0 while a checkpointed function runs again in the backward


def inside_checkpoint() -> bool:
    """True while the code runs inside :func:`checkpoint` (forward or recomputation)."""
    return _depth > 0


def is_recomputing() -> bool:
    """True while :func:`checkpoint` runs a function the second time, in the backward (so statistics that
    the forward already counted, such as MoE token counts and losses, are not counted twice)."""
    return _recomputing > 0


@contextlib.contextmanager
def _recomputation() -> Iterator[None]:
    global _recomputing
    _recomputing += 1
    try:
        yield
    finally:
        _recomputing -= 1


@contextlib.contextmanager
def _inside() -> Iterator[None]:
    global _depth
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


class _Checkpoint(torch.autograd.Function):
    """Forward without a graph; backward: recompute with the forward's RNG states, then backpropagate.

    ``anchor`` is a leaf that requires grad, so the backward runs (and the
    parameters inside get gradients) even when no input requires grad.
    """

    @staticmethod
    def forward(ctx, function: Callable[..., torch.Tensor], anchor: torch.Tensor, *args: Any) -> torch.Tensor:
        ctx.function, ctx.rng_states = function, get_dropout_rng_states()
        ctx.others = {i: arg for i, arg in enumerate(args) if not torch.is_tensor(arg)}
        ctx.save_for_backward(*(arg for arg in args if torch.is_tensor(arg)))
        with torch.no_grad(), _inside():
            return function(*args)

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        tensors = iter(ctx.saved_tensors)
        needs_grad = ctx.needs_input_grad[2:]
        args = [ctx.others[i] if i in ctx.others else next(tensors).detach().requires_grad_(needs_grad[i])
                for i in range(len(needs_grad))]
        backward_states = get_dropout_rng_states()
        set_dropout_rng_states(ctx.rng_states)
        try:
            with torch.enable_grad(), _inside(), _recomputation():
                output = ctx.function(*args)
        finally:
            set_dropout_rng_states(backward_states)
        if output.requires_grad:
            torch.autograd.backward(output, grad_output)
        grads = tuple(arg.grad if needs else None for arg, needs in zip(args, needs_grad))
        return (None, None) + grads


_anchors: Dict[torch.device, torch.Tensor] = {}


def _anchor(device: torch.device) -> torch.Tensor:
    if device not in _anchors:
        _anchors[device] = torch.zeros((), device=device, requires_grad=True)
    return _anchors[device]


def checkpoint(function: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor:
    """``function(*args)`` (one tensor out), keeping only the inputs; the backward recomputes the rest.

    The recomputation starts from the forward's dropout RNG states, so it is
    bit-identical; the backward's own RNG states are put back afterwards.
    Tensor arguments are saved for the backward; other arguments (layer lists,
    the rotary ``(cos, sin)`` tuple) are kept as they are.
    """
    device = next(arg.device for arg in args if torch.is_tensor(arg))
    return _Checkpoint.apply(function, _anchor(device), *args)


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


def recompute_activation(activation: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor,
                         consumer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """``consumer(activation(x))`` with the activation output recomputed from ``x`` in the backward.

    ``activation`` must be deterministic (no dropout). Once the consumer has
    run, the output's storage is released: what the consumer saved of it (the
    output or a view, e.g. a linear layer's input for its weight gradient) then
    holds no memory. A hook on the consumer's backward node, which runs before
    any of the consumer's backward, refills that storage with the recomputed
    values (MindSpeed's scheme: a storage copy, so autograd's version check
    still holds). The consumer's saved parameters stay the parameters.
    """
    if not torch.is_grad_enabled():
        return consumer(activation(x))
    out = _ActivationWithoutSavedOutputs.apply(activation, x)  # same layout as activation(x)
    result = consumer(out)
    if result.grad_fn is None:
        return result
    storage = out.untyped_storage()
    nbytes = storage.nbytes()
    storage.resize_(0)

    def refill(grad_outputs: Tuple[torch.Tensor, ...]) -> None:
        with torch.no_grad():
            rebuilt = activation(x)
        storage.resize_(nbytes)
        storage.copy_(rebuilt.untyped_storage())

    result.grad_fn.register_prehook(refill)
    return result
