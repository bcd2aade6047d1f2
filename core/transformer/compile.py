"""``--use-torch-compile``: regional compilation, as TorchTitan does it.

Each transformer layer of each model chunk is compiled on its own, in place
(``nn.Module.compile``), never the whole model: the compiled graph is one layer's
forward (and AOT autograd's backward), so every layer of the same shape reuses
it, pipeline stages and virtual chunks compile alike, and what the layers do
between them (embedding, pipeline sends, the loss) stays eager. In-place
compilation keeps the module tree as it is: parameter names (state dicts,
checkpoints, conversion), parameter objects (the param metadata, our DDP's
gradient hooks and buffers) and the layers FSDP wraps are unchanged. Layers are
compiled before data-parallel wrapping (TorchTitan's order); compilation itself
is lazy and happens in the first step.

Dynamo splits a layer where it cannot trace: the tensor-parallel RNG tracker's
fork around dropout and a few collectives are such graph breaks (the code
between two graphs runs eagerly). :class:`CompileReport` prints, once after
the first step, the compile seconds, the graphs and the graph breaks.

With dropout, inductor is told to draw its random numbers from eager PyTorch's
generator (``fallback_random``), so a compiled run equals an eager one and the
recompute of ``--recompute-granularity full`` redraws the same masks.

A backend that cannot compile (an unknown name, inductor without a C compiler)
fails in the first step; :func:`compile_failure` turns dynamo's exception into
the one line the trainer prints, naming the fallback: run without the flag.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import nn

from core.transformer.block import transformer_layers

DEFAULT_BACKEND = "inductor"
FALLBACK = "run without --use-torch-compile"


def available_backends() -> List[str]:
    """Every backend name ``torch.compile`` accepts (registered ones included)."""
    import torch._dynamo

    return torch._dynamo.list_backends(exclude_tags=())


def compile_layers(models: List[nn.Module], backend: str = DEFAULT_BACKEND, dropout: bool = False) -> int:
    """Compile, in place, every layer with parameters of every chunk; returns how many (noop layers stay eager).

    ``dropout``: the model draws dropout masks, so inductor uses eager's random numbers (exact recompute).
    """
    if dropout and backend == "inductor":
        import torch._inductor.config as inductor_config

        inductor_config.fallback_random = True
    layers = [layer for model in models for layer in transformer_layers(model)]
    for layer in layers:
        layer.compile(backend=backend)
    return len(layers)


def _dynamo_totals() -> Dict[str, float]:
    """Process-wide running totals: compile seconds (frames and backward graphs), graphs, graph breaks."""
    from torch._dynamo.utils import calculate_time_spent, counters

    return {"seconds": calculate_time_spent().get("total_wall_time", 0.0),
            "graphs": float(counters["stats"]["unique_graphs"]),
            "breaks": float(sum(counters["graph_break"].values()))}


@dataclass
class CompileReport:
    """The compile-time line printed after the first step (counts are differences since construction)."""

    layers: int
    backend: str
    start: Optional[Dict[str, float]] = None
    printed: bool = False

    def __post_init__(self) -> None:
        self.start = _dynamo_totals()

    def figures(self) -> Dict[str, float]:
        """Compile seconds, graphs compiled and graph breaks since this report began."""
        now = _dynamo_totals()
        return {name: now[name] - self.start[name] for name in now}

    def line(self, first_step_seconds: float) -> str:
        """``torch.compile: ...``: the layers, the compile seconds within the first step, graphs and breaks."""
        figures = self.figures()
        return (f"torch.compile ({self.backend}): {self.layers} layers compiled regionally; "
                f"{figures['seconds']:.1f} s of compilation in the first step ({first_step_seconds:.1f} s); "
                f"{int(figures['graphs'])} graphs, {int(figures['breaks'])} graph breaks")

    def after_step(self, step_seconds: float) -> Optional[str]:
        """The line once, after the first step; None afterwards."""
        if self.printed:
            return None
        self.printed = True
        return self.line(step_seconds)


def compile_failure(error: BaseException) -> Optional[str]:
    """One line for an exception raised because a backend could not compile a layer; None for any other."""
    from torch._dynamo.exc import BackendCompilerFailed, InvalidBackend

    if not isinstance(error, (BackendCompilerFailed, InvalidBackend)):
        return None
    cause = getattr(error, "inner_exception", None) or error
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    backend = getattr(error, "backend_name", None) or "the backend"
    return (f"--use-torch-compile: {backend} could not compile a transformer layer "
            f"({type(cause).__name__}: {reason[:200]}); {FALLBACK}")
