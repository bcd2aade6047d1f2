"""The feed-forward block, split over TP, with the ``--activation`` it names: gated (swiglu, geglu,
quick_geglu, gated_relu, ...: a fused ``[gate; up]``) or not (gelu by default, relu, squared_relu, xielu).

A gated MLP computes ``act(gate) * (up + --glu-linear-offset)``, the gate clamped to at most
``--activation-func-clamp-value`` and the up half to ``[-value, value]`` first (GPT-OSS's clamped SwiGLU:
``--activation quick_geglu``, 7.0 and 1.0); :func:`gated_activation` is that rule for the MLP and the experts
alike.

``gelu_tanh`` / ``geglu_tanh`` select GELU's tanh approximation (Gemma's ``gelu_pytorch_tanh``). xIELU (Apertus)
has two learnable scalars per layer; each TP rank applies them to its own FFN shard, so their gradient is a
partial sum over TP. ``--ffn-sub-norm`` (BitNet) RMS-normalises the activation over the full FFN width before
the second linear (sum of squares all-reduced over TP).

SwiGLU (``silu(gate) * up`` without clamp or offset) runs through one dispatch (``core/fused.py``):
with ``--use-fused-swiglu``, the vendor library's SwiGLU on an NPU, else a ``torch.compile``d reference;
``swiglu_kernel(device_type, fused)`` says which.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import VENDOR_KERNEL, kernels_by_device, vendor_op
from core.fused import FusedOp, decide_kernel, kernel_choice, register_fused_op
from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import inside_checkpoint, recompute_activation
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, Segment, mark_param
from core.transformer.config import TransformerConfig
from core.transformer.norms import TensorParallelRMSNorm

# xIELU's fixed constants and the initial alphas (transformers' XIELUActivation defaults, which Apertus uses)
XIELU_BETA, XIELU_EPS, XIELU_ALPHA_INIT = 0.5, -1e-6, 0.8


def squared_relu(x: torch.Tensor) -> torch.Tensor:
    """``relu(x) ** 2`` (Primer; Nemotron, Persimmon)."""
    return torch.square(F.relu(x))


QUICK_GELU_ALPHA = 1.702  # quick GELU's sigmoid gain (Megatron's quick_gelu; GPT-OSS's swiglu_alpha)


def quick_gelu(x: torch.Tensor) -> torch.Tensor:
    """``x * sigmoid(1.702 x)``, GELU's sigmoid approximation."""
    return x * torch.sigmoid(QUICK_GELU_ALPHA * x)


def swiglu_reference(intermediate: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` of ``[..., 2 x ffn/tp]`` ``[gate; up]`` -> ``[..., ffn/tp]``."""
    gate, up = intermediate.chunk(2, dim=-1)
    return F.silu(gate) * up


def _vendor_swiglu() -> Optional[Callable[[torch.Tensor], torch.Tensor]]:
    swiglu = vendor_op("swiglu")
    if swiglu is None:
        return None
    return lambda intermediate: swiglu(intermediate, dim=-1)


SWIGLU = FusedOp("swiglu", "--use-fused-swiglu", swiglu_reference,
                 kernels_by_device(vendor=(VENDOR_KERNEL, _vendor_swiglu)))


@kernel_choice
def swiglu_kernel(device_type: str, fused: bool = False) -> Tuple[str, Callable[[torch.Tensor], torch.Tensor]]:
    """SwiGLU's kernel on ``device_type`` (the vendor's | "compiled" | "reference"); ``fused``:
    ``--use-fused-swiglu``."""
    return decide_kernel(SWIGLU, device_type, fused)


register_fused_op("swiglu", "use_fused_swiglu", swiglu_kernel)


def gated_activation(intermediate: torch.Tensor, act: Callable[[torch.Tensor], torch.Tensor],
                     config: TransformerConfig) -> torch.Tensor:
    """``act(gate) * (up + offset)`` of a fused ``[..., 2 x ffn/tp]`` ``[gate; up]`` -> ``[..., ffn/tp]``, gate
    and up clamped first with ``--activation-func-clamp-value``, the gate scaled by the first of
    ``--mlp-multipliers``; plain SwiGLU through its kernel."""
    plain = (config.activation_func_clamp_value is None and config.glu_linear_offset == 0.0
             and not config.mlp_multipliers)
    if act is F.silu and plain:
        return swiglu_kernel(intermediate.device.type, config.use_fused_swiglu)[1](intermediate)
    gate, up = intermediate.chunk(2, dim=-1)
    if config.mlp_multipliers:  # Falcon-H1's muP gate scale
        gate = gate * config.mlp_multipliers[0]
    clamp = config.activation_func_clamp_value
    if clamp is not None:
        gate = gate.clamp(max=clamp)
        up = up.clamp(-clamp, clamp)
    if config.glu_linear_offset != 0.0:
        up = up + config.glu_linear_offset
    return act(gate) * up


def _inverse_softplus(value: float) -> float:
    return math.log(math.expm1(value))


class XIELU(nn.Module):
    """xIELU (arXiv 2411.13010): ``a_p x^2 + b x`` for ``x > 0``, else ``a_n (expm1(min(x, eps)) - x) + b x``,
    with ``a_p = softplus(alpha_p)`` and ``a_n = b + softplus(alpha_n)`` (alpha_p, alpha_n learnable ``[1]``).

    Each TP rank applies the alphas to its FFN shard: their gradients are partial sums over TP.
    """

    def __init__(self, dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        self.alpha_p = mark_param(nn.Parameter(torch.empty(1, dtype=dtype)), init="constant",
                                  init_value=_inverse_softplus(XIELU_ALPHA_INIT), grad_partial_over_tp=True)
        self.alpha_n = mark_param(nn.Parameter(torch.empty(1, dtype=dtype)), init="constant",
                                  init_value=_inverse_softplus(XIELU_ALPHA_INIT - XIELU_BETA),
                                  grad_partial_over_tp=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x [s, b, ffn/tp]
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = XIELU_BETA + F.softplus(self.alpha_n)
        negative = (torch.expm1(torch.clamp(x, max=XIELU_EPS)) - x) * alpha_n + XIELU_BETA * x
        return torch.where(x > 0, alpha_p * x * x + XIELU_BETA * x, negative)


ELEMENTWISE: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": F.silu, "quick_gelu": quick_gelu, "relu": F.relu, "squared_relu": squared_relu,
    "gelu": functools.partial(F.gelu, approximate="none"), "gelu_tanh": functools.partial(F.gelu, approximate="tanh"),
}


def activation_function(config: TransformerConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """The MLP's elementwise activation, from ``--activation`` (xIELU, with parameters, is a module: XIELU)."""
    return ELEMENTWISE[config.mlp_function]


class MLP(nn.Module):
    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        tp_group = state.tp_group
        self.config = config
        self.gated = config.gated_linear_unit
        self.xielu = XIELU(config.params_dtype) if config.mlp_function == "xielu" else None
        self.act = self.xielu.forward if self.xielu is not None else activation_function(config)
        self.recompute_activation_function = config.recompute_activation_function
        ffn = config.ffn_hidden_size
        bias = config.mlp_bias
        fc1_segments = (Segment(ffn), Segment(ffn)) if self.gated else (Segment(ffn),)
        self.linear_fc1 = ColumnParallelLinear(
            config.hidden_size, ffn * len(fc1_segments), group=tp_group, bias=bias,
            sequence_parallel=config.sequence_parallel, segments=fc1_segments, dtype=config.params_dtype)
        self.linear_fc2 = RowParallelLinear(
            ffn, config.hidden_size, group=tp_group, bias=bias,
            sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)
        self.sub_layernorm = None
        if config.ffn_sub_norm:  # over the full FFN width, split over TP
            self.sub_layernorm = TensorParallelRMSNorm(Segment(ffn), config.norm_epsilon, tp_group,
                                                       config.params_dtype, config.apply_layernorm_1p)

    def forward(self, hidden: torch.Tensor, fc1_delta: Optional[torch.Tensor] = None) -> torch.Tensor:
        # fc1_delta: added to the local first projection (a shared block's per-layer adapter)
        intermediate = self.linear_fc1(hidden)  # [s, b, (2) ffn/tp]
        if fc1_delta is not None:
            intermediate = intermediate + fc1_delta
        if self.recompute_activation_function and self.training and not inside_checkpoint():
            return recompute_activation(self._activation, intermediate, self._output)  # [s, b, h]
        return self._output(self._activation(intermediate))  # [s, b, h]

    def _output(self, activated: torch.Tensor) -> torch.Tensor:
        """The second linear of the activation ``[s, b, ffn/tp]`` (after ``--ffn-sub-norm``): ``[s, b, h]``."""
        if self.sub_layernorm is not None:
            activated = self.sub_layernorm(activated)
        output = self.linear_fc2(activated)
        return output * self.config.mlp_multipliers[1] if self.config.mlp_multipliers else output

    def _activation(self, intermediate: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return gated_activation(intermediate, self.act, self.config)  # [s, b, ffn/tp]
        return self.act(intermediate)  # [s, b, ffn/tp]
