"""The experts of an MoE layer: one MLP per expert, this EP rank's experts' weights stacked, split over TP like
the dense MLP.

Under expert parallelism EP rank ``r`` holds experts ``[r * E / ep, (r + 1) * E / ep)``; below "experts"
means these local ones. ``linear_fc1.weight`` [experts, (2 x) ffn / tp, h] holds each expert's
column-parallel first linear (``[gate; up]`` segments when gated, as the dense MLP's fused fc1); ``linear_fc2.weight``
[experts, h, ffn / tp] each expert's row-parallel second linear. Each TP rank computes its FFN
shard for every token routed to it, so the output is a partial sum over TP that the MoE layer
reduces once for all experts. Both weights are marked ``is_expert`` (their gradients are summed
over the expert-data-parallel group, which equals the data-parallel group at EP 1).

With expert biases (``config.mlp_bias``: ``--add-bias-linear`` or ``--add-mlp-bias``; GPT-OSS)
``linear_fc1.bias`` [experts, (2 x) ffn / tp] is split over TP like the fc1 weight and
``linear_fc2.bias`` [experts, h] is replicated: TP rank 0 alone adds it, so the reduced output holds it
once, and its gradient (zero on the other ranks) is marked partial over TP. Each row gets the bias of
its expert. The gated activation is the dense MLP's (:func:`core.transformer.mlp.gated_activation`).

The experts' products run as a loop over experts, or with ``--moe-grouped-gemm`` as one
``torch._grouped_mm`` per linear where this torch build has it and the shapes meet its 16-byte
stride alignment (otherwise the loop, which gives the same numbers). The loop's products go through
:func:`core.tensor_parallel.layers.linear`, so bf16 experts on a CPU without bf16 units multiply in fp32
(``core.device.gemm_dtype``), and there the loop also stands in for the grouped GEMM.
"""
from __future__ import annotations

from typing import List

import torch
from torch import nn

from core.device import gemm_dtype
from core.parallel_state import ParallelState
from core.tensor_parallel.layers import Segment, linear, mark_param
from core.tensor_parallel.param_meta import TPShard, update_meta
from core.transformer.config import TransformerConfig
from core.transformer.mlp import activation_function, gated_activation

GROUPED_MM_ALIGNMENT = 16  # bytes: torch._grouped_mm needs strides that are multiples of this


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose backward hands on a contiguous gradient (torch._grouped_mm's backward needs one)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


def grouped_mm_available(dtype: torch.dtype, *widths: int) -> bool:
    """Whether torch._grouped_mm exists here and rows of these widths meet its stride alignment."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return hasattr(torch, "_grouped_mm") and all(w * itemsize % GROUPED_MM_ALIGNMENT == 0 for w in widths)


def grouped_linear(rows: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """``rows`` [n, in] grouped by expert times each expert's ``weight`` [experts, out, in]^T: [n, out]."""
    offsets = torch.cumsum(tokens_per_expert, dim=0).to(torch.int32)
    return _ContiguousGrad.apply(torch._grouped_mm(rows, weight.transpose(1, 2), offs=offsets))


def looped_linear(rows: torch.Tensor, weight: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
    """The same product as :func:`grouped_linear`, one matmul per expert."""
    pieces: List[torch.Tensor] = []
    for expert, chunk in enumerate(rows.split(tokens_per_expert.tolist(), dim=0)):
        pieces.append(linear(chunk, weight[expert], defer_weight_grad=False))  # [n_e, out]
    return torch.cat(pieces, dim=0) if pieces else rows.new_zeros(0, weight.shape[1])


class ExpertMLPs(nn.Module):
    """Every local expert's MLP over the permuted rows; the output is partial over TP (complete when whole
    experts spread over TP, --expert-tensor-parallel-size 1)."""

    def __init__(self, config: TransformerConfig, state: ParallelState) -> None:
        super().__init__()
        self.split_over_tp = state.experts_split_over_tp
        tp = state.tp_group.size if self.split_over_tp else 1
        experts = config.num_experts // state.expert_group.size
        ffn, hidden = config.moe_expert_ffn_hidden_size, config.hidden_size
        self.config = config
        self.gated = config.gated_linear_unit
        self.act = activation_function(config)
        segments = (Segment(ffn), Segment(ffn)) if self.gated else (Segment(ffn),)
        self.linear_fc1 = nn.Module()
        self.linear_fc1.weight = self._expert_param(
            (experts, len(segments) * ffn // tp, hidden), self._shard(1, segments), "normal", config)
        self.linear_fc2 = nn.Module()
        self.linear_fc2.weight = self._expert_param(
            (experts, hidden, ffn // tp), self._shard(2, (Segment(ffn),)), "scaled_normal", config)
        if config.mlp_bias:
            self._add_biases(config, state, segments)
        else:
            self.linear_fc1.bias = self.linear_fc2.bias = None
        self.use_grouped_mm = config.moe_grouped_gemm and grouped_mm_available(
            config.params_dtype, hidden, ffn // tp, len(segments) * ffn // tp)

    def _shard(self, dim: int, segments: tuple) -> "TPShard | None":
        """How an expert tensor splits over TP: like the dense MLP's, or not at all (whole experts per rank)."""
        return TPShard(dim, segments) if self.split_over_tp else None

    def _mark(self, param: nn.Parameter, config: TransformerConfig, **meta: object) -> nn.Parameter:
        """An expert parameter: reduced over expert-DP, 1/EP of the layer's experts, distinct per TP rank when
        whole experts spread over TP."""
        return update_meta(mark_param(param, **meta), is_expert=True, num_global_experts=config.num_experts,
                           distinct_over_tp=not self.split_over_tp)

    def _expert_param(self, shape: tuple, shard: "TPShard | None", init: str,
                      config: TransformerConfig) -> nn.Parameter:
        param = nn.Parameter(torch.empty(shape, dtype=config.params_dtype))
        std = config.init_method_std / ((2.0 * config.num_layers) ** 0.5 if init == "scaled_normal" else 1.0)
        nn.init.normal_(param, std=std)
        return self._mark(param, config, init=init, tp_shard=shard)

    def _add_biases(self, config: TransformerConfig, state: ParallelState, segments: tuple) -> None:
        """fc1's bias split over TP like its weight; fc2's replicated, added by TP rank 0 only (by every rank
        when the experts are whole)."""
        experts = self.linear_fc1.weight.shape[0]
        partial = self.split_over_tp and state.tp_group.size > 1
        fc1_bias = nn.Parameter(torch.zeros(experts, self.linear_fc1.weight.shape[1], dtype=config.params_dtype))
        self.linear_fc1.bias = self._mark(fc1_bias, config, init="zeros", tp_shard=self._shard(1, segments))
        fc2_bias = nn.Parameter(torch.zeros(experts, config.hidden_size, dtype=config.params_dtype))
        self.linear_fc2.bias = self._mark(fc2_bias, config, init="zeros", grad_partial_over_tp=partial)
        self.adds_fc2_bias = state.tp_group.rank == 0 or not self.split_over_tp

    def forward(self, rows: torch.Tensor, tokens_per_expert: torch.Tensor) -> torch.Tensor:
        """``rows`` [n, h] grouped by expert (``tokens_per_expert`` [experts]) -> [n, h], partial over TP."""
        grouped = self.use_grouped_mm and gemm_dtype(rows) == rows.dtype  # no bf16 units: the loop's fp32 products
        expert_linear = grouped_linear if grouped else looped_linear
        row_expert = None  # [n] each row's expert, for the biases
        if self.linear_fc1.bias is not None:
            experts = torch.arange(tokens_per_expert.numel(), device=rows.device)
            row_expert = torch.repeat_interleave(experts, tokens_per_expert.to(rows.device))
        intermediate = expert_linear(rows, self.linear_fc1.weight, tokens_per_expert)  # [n, (2) ffn/tp]
        if row_expert is not None:
            intermediate = intermediate + self.linear_fc1.bias[row_expert]
        if self.gated:
            activated = gated_activation(intermediate, self.act, self.config)  # [n, ffn/tp]
        else:
            activated = self.act(intermediate)  # [n, ffn/tp]
        output = expert_linear(activated, self.linear_fc2.weight, tokens_per_expert)  # [n, h]
        if row_expert is not None and self.adds_fc2_bias:
            output = output + self.linear_fc2.bias[row_expert]
        return output
