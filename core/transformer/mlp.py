"""The feed-forward block, split over TP: gated (SwiGLU, GeGLU; fused ``[gate; up]``) or not (GELU by
default, ``--relu``, ``--squared-relu``).

``--gelu-tanh`` selects GELU's tanh approximation (Gemma's ``gelu_pytorch_tanh``).
"""
from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import inside_checkpoint, recompute_activation
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, Segment
from core.transformer.config import TransformerConfig


def squared_relu(x: torch.Tensor) -> torch.Tensor:
    """``relu(x) ** 2`` (Primer; Nemotron, Persimmon)."""
    return torch.square(F.relu(x))


def activation_function(config: TransformerConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """The MLP's elementwise activation, from the activation flags."""
    if config.swiglu:
        return F.silu
    if config.relu:
        return F.relu
    if config.squared_relu:
        return squared_relu
    return functools.partial(F.gelu, approximate="tanh" if config.gelu_tanh else "none")


class MLP(nn.Module):
    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        tp_group = state.tp_group
        self.gated = config.gated_linear_unit
        self.act = activation_function(config)
        self.recompute_activation_function = config.recompute_activation_function
        ffn = config.ffn_hidden_size
        bias = config.add_bias_linear or config.add_mlp_bias
        fc1_segments = (Segment(ffn), Segment(ffn)) if self.gated else (Segment(ffn),)
        self.linear_fc1 = ColumnParallelLinear(
            config.hidden_size, ffn * len(fc1_segments), group=tp_group, bias=bias,
            sequence_parallel=config.sequence_parallel, segments=fc1_segments, dtype=config.params_dtype)
        self.linear_fc2 = RowParallelLinear(
            ffn, config.hidden_size, group=tp_group, bias=bias,
            sequence_parallel=config.sequence_parallel, dtype=config.params_dtype)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        intermediate = self.linear_fc1(hidden)  # [s, b, (2) ffn/tp]
        if self.recompute_activation_function and self.training and not inside_checkpoint():
            return recompute_activation(self._activation, intermediate, self.linear_fc2)  # [s, b, h]
        return self.linear_fc2(self._activation(intermediate))  # [s, b, h]

    def _activation(self, intermediate: torch.Tensor) -> torch.Tensor:
        if self.gated:
            gate, up = intermediate.chunk(2, dim=-1)
            return self.act(gate) * up  # [s, b, ffn/tp]
        return self.act(intermediate)  # [s, b, ffn/tp]
