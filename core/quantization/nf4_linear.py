"""Frozen NF4 weights inside the tensor-parallel linear layers (QLoRA's base model).

:func:`quantize_module_linears` swaps the weight of each targeted :class:`ColumnParallelLinear` /
:class:`RowParallelLinear` for an :class:`NF4Tensor`: this rank's local shard (``[out/tp, in]`` or
``[out, in/tp]``, fused QKV / gate-up segments included) stored as NF4 (:mod:`core.quantization.nf4`),
about 0.52 bytes per weight. The layers themselves do not change: they still read ``self.weight`` and
call ``F.linear``; the NF4 weight intercepts ``F.linear`` and runs :class:`_NF4Linear`, which
dequantises to the compute dtype (the input's), multiplies, and in the backward dequantises again for the
input gradient (no dense weight is kept for the backward, and no weight gradient exists). Every other
operation on the weight (``layer.weight.float()``, ``x @ layer.weight.t()``, a LoRA merge) sees the
dequantised dense weight; writing into it is refused.

The NF4 weight is not a parameter: no gradient buffer, no optimizer state and no checkpoint entry.
Quantise last, after loading the base checkpoint, the dtype cast and the move to the device (a later
``model.to(...)`` leaves NF4 weights where they are). Biases stay parameters, as they were.

A LoRA integration calls ``quantize_module_linears(model, args.lora_target_modules)`` on the loaded
base model, then adds its adapters: the adapter reads the layer's input and joins its output exactly
as on a dense layer. ``layer.weight.dequantized()`` gives the dense weight for merged exports.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._pytree import tree_map

from core.quantization.nf4 import NF4_BLOCKSIZE, NF4State, QuantizationError, dequantize_nf4, quantize_nf4
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from core.tensor_parallel.param_meta import copy_meta

QUANTIZABLE_LINEARS = (ColumnParallelLinear, RowParallelLinear)


class _NF4Linear(torch.autograd.Function):
    """``x W^T`` with W dequantised from NF4 to x's dtype in the forward, and again in the backward (W is frozen)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: "NF4Tensor") -> torch.Tensor:
        ctx.weight = weight  # the NF4 storage only: nothing dense is saved for the backward
        return F.linear(x, weight.dequantized(x.dtype))  # [..., out]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> Tuple[Optional[torch.Tensor], None]:
        if not ctx.needs_input_grad[0]:
            return None, None
        return grad_output.matmul(ctx.weight.dequantized(grad_output.dtype)), None  # [..., in]


def _linear_arguments(args: tuple, kwargs: dict) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """``(input, weight, bias)`` of an ``F.linear`` call, however it was spelled."""
    names = ("input", "weight", "bias")
    values = dict(zip(names, args), **kwargs)
    return values["input"], values["weight"], values.get("bias")


def _written_arguments(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> List[object]:
    """The arguments an ATen op writes into (in-place and ``out=`` targets)."""
    written = []
    for index, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            written.append(args[index] if index < len(args) else kwargs.get(argument.name))
    return written


class NF4Tensor(torch.Tensor):
    """A frozen weight of logical shape and dtype ``(state.shape, dtype)`` held as NF4 (:class:`NF4State`).

    ``F.linear`` with it as the weight runs :class:`_NF4Linear`; any other op dequantises it first.
    It never requires grad, and in-place writes into it raise.
    """

    state: NF4State

    @staticmethod
    def __new__(cls, state: NF4State, dtype: torch.dtype) -> "NF4Tensor":
        return torch.Tensor._make_wrapper_subclass(cls, state.shape, dtype=dtype, device=state.device,
                                                   requires_grad=False)

    def __init__(self, state: NF4State, dtype: torch.dtype) -> None:
        self.state = state

    @classmethod
    def from_dense(cls, weight: torch.Tensor, blocksize: int = NF4_BLOCKSIZE,
                   double_quant: bool = True) -> "NF4Tensor":
        """``weight`` quantised; it keeps the weight's dtype (the compute dtype) and its parameter metadata."""
        quantized = cls(quantize_nf4(weight.detach(), blocksize, double_quant), weight.dtype)
        return copy_meta(weight, quantized)

    def dequantized(self, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The dense weight, in ``dtype`` (default: the weight's dtype)."""
        return dequantize_nf4(self.state, dtype or self.dtype)

    def nbytes_stored(self) -> int:
        """Bytes the NF4 storage takes (codes, absmax constants and their scales)."""
        return self.state.nbytes()

    def _alias(self, state: NF4State) -> "NF4Tensor":
        return copy_meta(self, NF4Tensor(state, self.dtype))

    def __repr__(self, *, tensor_contents: object = None) -> str:
        return (f"NF4Tensor(shape={tuple(self.shape)}, dtype={self.dtype}, blocksize={self.state.blocksize}, "
                f"double_quant={self.state.double_quant})")

    def __deepcopy__(self, memo: Dict[int, object]) -> "NF4Tensor":
        result = self._alias(self.state.clone())
        memo[id(self)] = result
        return result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight, bias = _linear_arguments(args, kwargs)
            if isinstance(weight, NF4Tensor) and not isinstance(x, NF4Tensor):
                y = _NF4Linear.apply(x, weight)  # [..., out]
                return y + bias if bias is not None else y
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            return args[0]._alias(args[0].state)
        if any(isinstance(target, NF4Tensor) for target in _written_arguments(func, args, kwargs)):
            raise QuantizationError(f"an NF4 weight is frozen: {func} would write into it; "
                                    "use weight.dequantized() for a dense copy")
        dense = lambda value: value.dequantized() if isinstance(value, NF4Tensor) else value
        return func(*tree_map(dense, args), **tree_map(dense, kwargs))


def quantize_linear_(layer: nn.Module, blocksize: int = NF4_BLOCKSIZE, double_quant: bool = True) -> NF4Tensor:
    """Replace, in place, the weight parameter of a column/row-parallel ``layer`` by its NF4 storage."""
    if not isinstance(layer, QUANTIZABLE_LINEARS):
        raise QuantizationError(f"NF4 storage needs a ColumnParallelLinear or RowParallelLinear, "
                                f"got {type(layer).__name__}")
    if isinstance(layer.weight, NF4Tensor):
        return layer.weight
    quantized = NF4Tensor.from_dense(layer.weight, blocksize, double_quant)
    del layer.weight  # the parameter goes: no gradient buffer, optimizer state or checkpoint entry
    layer.weight = quantized  # a plain attribute, read by the layer's forward as before
    return quantized


def _modules_named(model: nn.Module, targets: Sequence[str]) -> Dict[str, List[Tuple[str, nn.Module]]]:
    """Per target, the ``(qualified name, module)`` pairs whose last name component is the target."""
    found: Dict[str, List[Tuple[str, nn.Module]]] = {target: [] for target in targets}
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in found:
            found[leaf].append((name, module))
    return found


def _linear_leaf_names(model: nn.Module) -> List[str]:
    return sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                   if isinstance(module, QUANTIZABLE_LINEARS)})


def check_quantization_targets(model: nn.Module, targets: Sequence[str],
                               flag: str = "--lora-target-modules") -> Dict[str, List[Tuple[str, nn.Module]]]:
    """The targeted modules, after checking every one is a column/row-parallel linear layer.

    A target naming no module, or any module that is not such a linear layer (a norm, the MoE
    experts' grouped weights), raises a one-line :class:`QuantizationError` naming ``flag``.
    """
    found = _modules_named(model, targets)
    for target, modules in found.items():
        if not modules:
            raise QuantizationError(f"{flag}: {target!r} names no module of the model "
                                    f"(its linear layers: {' '.join(_linear_leaf_names(model))})")
        for name, module in modules:
            if not isinstance(module, QUANTIZABLE_LINEARS):
                raise QuantizationError(
                    f"{flag}: --qlora stores linear layers only, but {target!r} is a {type(module).__name__} "
                    f"({name}); target linear layers ({' '.join(_linear_leaf_names(model))})")
    return found


@torch.no_grad()
def quantize_module_linears(model: nn.Module, targets: Sequence[str], blocksize: int = NF4_BLOCKSIZE,
                            double_quant: bool = True, flag: str = "--lora-target-modules") -> List[str]:
    """Store the weight of every targeted linear layer of ``model`` as NF4; returns their names.

    ``targets`` are module names as ``--lora-target-modules`` gives them (``linear_qkv linear_proj
    linear_fc1 linear_fc2``): every module whose last name component is one of them. All targets are
    checked before any weight changes (:func:`check_quantization_targets`), so an error leaves the
    model as it was.
    """
    found = check_quantization_targets(model, targets, flag)
    names = []
    for modules in found.values():
        for name, module in modules:
            quantize_linear_(module, blocksize, double_quant)
            names.append(name)
    return sorted(names)


def dequantized_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """``model.state_dict()`` with each NF4 weight back as a dense tensor under its parameter's name."""
    result = dict(model.state_dict())
    for name, module in model.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, NF4Tensor):
            result[f"{name}.weight" if name else "weight"] = weight.dequantized()
    return result
