"""Fused kernels behind one dispatch per operation (DESIGN.md, principle 7).

Each operation is a :class:`FusedOp`: a pure-PyTorch reference, the package kernels per device type (a
loader returns the kernel, or None when its package is missing) and what its flag does where no package
kernel exists. :func:`decide_kernel` picks, once per (operation, device type, flag), a ``(name, function)``:

- without the flag: the reference, except for operations whose package kernels are today's default
  (RMSNorm: the vendor library's on an NPU, apex on CUDA; ``core/device.py`` maps packages to devices);
- with the flag (``--use-fused-rmsnorm``, ``--use-fused-swiglu``, ``--use-fused-rotary-pos-emb``,
  ``--use-flash-attn``): the package kernel of the device when it imports, else a ``torch.compile``d
  reference (``"compiled"``, compiled lazily on the first call; faster than eager on the CPU, see
  tests/unit/test_fused_ops.py), else the reference with ONE warning naming the flag and the path used.

A compiled region compiles with torch.compile's default shape handling (static shapes first; a dimension
that changes between calls, as queries' and keys' head counts do, is made dynamic after one recompile), so
a training run compiles each operation two or three times, a few seconds in all on the CPU with inductor's
cache warm (``CompiledRegion.compile_seconds`` has the first compile's time). One that fails to compile (on
its first call: a probe forward and backward) warns once and runs the reference from then on. Attention's
"reference" is the caller's ``scaled_dot_product_attention`` path (``"sdpa"``): its kernels return None
for a call they cannot serve (a document mask, ALiBi, ...), and the caller then takes that path.
:func:`fused_kernels_line` is the training log's one line naming each choice.
"""
from __future__ import annotations

import functools
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import torch

Kernel = Callable[..., Any]
Loader = Callable[[], Optional[Kernel]]


@dataclass(eq=False)
class FusedOp:
    """One operation: its reference, package kernels by device type, and its flag's fallback."""

    name: str  # as in the log line: "rmsnorm", "swiglu", "rope", "attention"
    flag: str  # the command-line flag that asks for the fused path
    reference: Kernel
    kernels: Dict[str, Tuple[str, Loader]]  # device type -> (kernel name, loader)
    reference_name: str = "reference"
    compilable: bool = True  # with the flag and no package kernel: a torch.compile'd reference
    kernels_by_default: bool = False  # the package kernel even without the flag (today's RMSNorm)
    dynamic_shapes: bool = False  # compile for any shape at once (the loss's blocks change width)


@dataclass(eq=False)
class CompiledRegion:
    """``torch.compile`` of a reference, compiled on the first call (a probe forward + backward on copies of
    that call's inputs); if compiling fails it warns once and runs the reference from then on."""

    reference: Kernel
    flag: str
    dynamic: Optional[bool] = None  # torch.compile's: None recompiles a changing dimension as dynamic
    compile_seconds: float = 0.0
    failed: bool = False
    _compiled: Optional[Kernel] = field(default=None, repr=False)

    def __call__(self, *args: Any) -> Any:
        if self.failed or torch.compiler.is_compiling():  # inside a compiled layer: its graph takes the reference
            return self.reference(*args)
        if self._compiled is None:
            self._compiled = self._compile(args)
            if self.failed:
                return self.reference(*args)
        return self._compiled(*args)

    def _compile(self, args: Tuple[Any, ...]) -> Optional[Kernel]:
        start = time.perf_counter()
        compiled = torch.compile(self.reference, dynamic=self.dynamic)
        try:
            _probe(compiled, args)
        except Exception as error:  # any backend failure: the reference keeps training going
            self.failed = True
            warnings.warn(f"{self.flag}: torch.compile failed ({type(error).__name__}: "
                          f"{str(error).splitlines()[0][:200] if str(error) else ''}); using the reference",
                          RuntimeWarning, stacklevel=3)
            return None
        self.compile_seconds += time.perf_counter() - start
        return compiled


def _probe(compiled: Kernel, args: Tuple[Any, ...]) -> None:
    """Run ``compiled`` forward (and backward where inputs need gradients) on detached copies of ``args``,
    so a compile error surfaces here rather than inside the training step's backward."""
    copies = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
              for a in args]
    needs_grad = [a for a in copies if isinstance(a, torch.Tensor) and a.requires_grad]
    with torch.set_grad_enabled(torch.is_grad_enabled() and bool(needs_grad)):
        out = compiled(*copies)
        if needs_grad and isinstance(out, torch.Tensor) and out.requires_grad:
            torch.autograd.grad(out, needs_grad, torch.ones_like(out))


_COMPILED: Dict[int, CompiledRegion] = {}  # id(op) -> its one compiled region


def compiled_region(op: FusedOp) -> CompiledRegion:
    """The compiled reference of ``op`` (one per operation, shared by all device types)."""
    if id(op) not in _COMPILED:
        _COMPILED[id(op)] = CompiledRegion(op.reference, op.flag, dynamic=True if op.dynamic_shapes else None)
    return _COMPILED[id(op)]


def decide_kernel(op: FusedOp, device_type: str, fused: bool) -> Tuple[str, Kernel]:
    """``(name, function)`` of ``op`` for tensors on ``device_type``; ``fused``: its flag was given.

    Each operation's module caches this per (device type, flag) in its ``*_kernel`` function, registered
    with :func:`register_fused_op`, so the loaders run and a warning is given once.
    """
    if fused or op.kernels_by_default:
        name, loader = op.kernels.get(device_type, (op.reference_name, lambda: None))
        kernel = loader()
        if kernel is not None:
            return name, kernel
    if not fused:
        return op.reference_name, op.reference
    if op.compilable:
        return "compiled", compiled_region(op)
    warnings.warn(f"{op.flag}: no fused {op.name} kernel on {device_type}; using {op.reference_name}",
                  RuntimeWarning, stacklevel=3)
    return op.reference_name, op.reference


Chooser = Callable[[str, bool], Tuple[str, Kernel]]


def kernel_choice(decide: Chooser) -> Chooser:
    """``decide`` cached per ``(device type, flag)`` in a plain dict, with ``cache_clear`` as ``lru_cache`` has.

    A compiled layer calls its choosers; dynamo traces through an ``lru_cache`` wrapper into the decision
    (loaders and all) on every compile, with a warning, while a dict lookup it reads as a guarded constant.
    """
    choices: Dict[Tuple[str, bool], Tuple[str, Kernel]] = {}

    @functools.wraps(decide)
    def chooser(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
        key = (device_type, bool(fused))
        if key not in choices:
            choices[key] = decide(device_type, fused)
        return choices[key]
    chooser.cache_clear = choices.clear  # type: ignore[attr-defined]
    return chooser


# operation name -> (TransformerConfig field of its flag, the cached chooser ``(device_type, fused)``)
FUSED_OPS: Dict[str, Tuple[str, Any]] = {}


def register_fused_op(name: str, config_field: str, chooser: Any) -> None:
    """Make ``chooser`` (a :func:`kernel_choice` ``(device_type, fused) -> (name, kernel)``) known to the log line
    and to :func:`reset_choices`."""
    FUSED_OPS[name] = (config_field, chooser)


def chosen_kernels(config: Any, device_type: str) -> Dict[str, str]:
    """The kernel name of each registered operation for ``config``'s flags on ``device_type``."""
    order = ("rmsnorm", "add_rmsnorm", "swiglu", "rope", "attention")
    names = sorted(FUSED_OPS, key=lambda name: order.index(name) if name in order else len(order))
    return {name: FUSED_OPS[name][1](device_type, bool(getattr(config, FUSED_OPS[name][0])))[0] for name in names}


def reset_choices() -> None:
    """Forget every choice and compiled region (tests swap fake kernels in and out)."""
    for _, chooser in FUSED_OPS.values():
        chooser.cache_clear()
    _COMPILED.clear()


def fused_kernels_line(config: Any, device_type: str) -> str:
    """``fused kernels: rmsnorm=compiled add_rmsnorm=compiled swiglu=compiled rope=reference attention=sdpa``
    for the log."""
    return "fused kernels: " + " ".join(f"{op}={name}" for op, name in chosen_kernels(config, device_type).items())
