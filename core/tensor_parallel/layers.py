"""Tensor-parallel layers: column/row-parallel linear and vocab-parallel embedding.

Each layer is a drop-in ``nn.Linear`` / ``nn.Embedding``: at TP=1 it computes
exactly what those compute. Every parameter gets a
:class:`~core.tensor_parallel.param_meta.ParamMeta` (:func:`mark_param`); a
parameter split over TP records there its :class:`TPShard`, which maps the
full, layout-free tensor to this rank's slice and back; weight initialisation,
checkpoint conversion and tests all go through it, so results never depend on
the TP degree. Fused weights (QKV, gate/up) and replicated GQA key/value heads
are described in :mod:`core.tensor_parallel.param_meta`.

Zero-bubble pipelining (ZB-H1) splits each backward into B (input gradients)
and W (weight gradients). While a :class:`WeightGradStore` is active
(:func:`defer_weight_grads`), the linear products of the column/row-parallel
layers run through a custom autograd function whose backward computes the input
gradient only and queues ``(weight, bias, input, grad_output)``; the store's
:meth:`WeightGradStore.weight_grads` later computes ``grad_W = grad_out^T x``
and the bias sums. With no active store the layers call ``F.linear`` and ``+``
exactly as before, so every other schedule is bit-for-bit unchanged.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import gemm_dtype
from core.parallel_state import Group
from core.tensor_parallel.mappings import (
    copy_to_tensor_model_parallel_region,
    gather_from_sequence_parallel_region,
    gather_from_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region,
    reduce_scatter_to_sequence_parallel_region,
    scatter_to_tensor_model_parallel_region,
)
from core.tensor_parallel.param_meta import ParamMeta, Segment, TPShard, set_meta, sum_replicas_over_tp


def reduce_replicated_grads(grad: torch.Tensor, shard: TPShard, group: Group) -> None:
    """Sum, in place, the partial gradients that replicas of a unit computed (the whole local tensor)."""
    sum_replicas_over_tp(grad.view(-1), shard, grad.shape, 0, group)


def mark_param(param: nn.Parameter, *, init: str, tp_shard: Optional[TPShard] = None,
               grad_partial_over_tp: bool = False, init_shape: Optional[Sequence[int]] = None,
               init_value: float = 0.0) -> nn.Parameter:
    """Give a parameter its :class:`ParamMeta` (read by initialisation, conversion and grad sync).

    ``init``: 'normal', 'scaled_normal' (output layers), 'ones', 'zeros' or 'constant' (``init_value``).
    ``grad_partial_over_tp``: replicated over TP but fed a sequence shard, so its
    gradient is summed over TP. ``init_shape``: the unpadded full shape to draw
    random values for (the rest of the full tensor is zero padding).
    """
    return set_meta(param, ParamMeta(tp_shard=tp_shard, grad_partial_over_tp=grad_partial_over_tp, init_method=init,
                                     init_shape=tuple(init_shape) if init_shape is not None else None,
                                     init_value=init_value))


class ReplicatedLinear(nn.Module):
    """``Y = X A^T + b`` with the whole weight ``[out, in]`` on every TP rank (whole gradients)."""

    def __init__(self, input_size: int, output_size: int, bias: bool, dtype: Optional[torch.dtype]) -> None:
        super().__init__()
        self.weight = mark_param(nn.Parameter(torch.empty(output_size, input_size, dtype=dtype)), init="normal")
        self.bias = None
        if bias:
            self.bias = mark_param(nn.Parameter(torch.empty(output_size, dtype=dtype)), init="zeros")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


class DeferredGrad(NamedTuple):
    """One deferred weight-gradient computation: ``weight`` and/or ``bias`` (None when not deferred)."""

    weight: Optional[torch.Tensor]
    bias: Optional[torch.Tensor]
    input: Optional[torch.Tensor]  # [..., in] as the product saw it (all-gathered under SP)
    grad_output: torch.Tensor  # [..., out]


class WeightGradStore:
    """Weight gradients of linear layers held back from a backward until a later step (ZB-H1's W).

    The backward of every deferred product appends a :class:`DeferredGrad`;
    :meth:`take` returns (and forgets) what the backwards since the last take
    queued, one micro-batch's worth when called after each B. The entries keep
    their inputs and output gradients alive until :meth:`weight_grads` has run.
    """

    def __init__(self) -> None:
        self._queue: List[DeferredGrad] = []

    def push(self, entry: DeferredGrad) -> None:
        self._queue.append(entry)

    def take(self) -> List[DeferredGrad]:
        entries, self._queue = self._queue, []
        return entries

    def __len__(self) -> int:
        return len(self._queue)

    @staticmethod
    @torch.no_grad()
    def weight_grads(entries: Sequence[DeferredGrad]) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        """``(param, gradient)`` per deferred parameter, summed when a parameter appears more than once.

        The GEMMs are those of ``F.linear``'s own backward (``grad_out^T x`` on the
        flattened tokens, the bias as a sum over them), so the results are identical.
        """
        sums: dict = {}
        for entry in entries:
            grad_out = entry.grad_output.reshape(-1, entry.grad_output.shape[-1])  # [tokens, out]
            if entry.weight is not None:
                x = entry.input.reshape(-1, entry.input.shape[-1])  # [tokens, in]
                _add_to(sums, entry.weight, grad_out.t().mm(x))  # [out, in]
            if entry.bias is not None:
                _add_to(sums, entry.bias, grad_out.sum(0))  # [out]
        return list(sums.values())


def _add_to(sums: dict, param: torch.Tensor, grad: torch.Tensor) -> None:
    key = id(param)
    sums[key] = (param, sums[key][1] + grad) if key in sums else (param, grad)


_active_store: Optional[WeightGradStore] = None  # set only inside ``defer_weight_grads``


@contextlib.contextmanager
def defer_weight_grads(store: Optional[WeightGradStore]) -> Iterator[Optional[WeightGradStore]]:
    """Linear products built inside defer their weight gradients to ``store`` (None: no deferral)."""
    global _active_store
    previous, _active_store = _active_store, store
    try:
        yield store
    finally:
        _active_store = previous


def _deferred(param: Optional[torch.Tensor]) -> bool:
    return param is not None and param.requires_grad


class _LinearDeferredWeightGrad(torch.autograd.Function):
    """``F.linear`` whose backward returns the input gradient and queues the weight/bias gradients."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                store: WeightGradStore) -> torch.Tensor:
        # The parameters ride on ctx, not through save_for_backward: under saved-tensor hooks
        # (--swap-attention) a saved tensor comes back as a new tensor object, and W needs the parameter.
        ctx.save_for_backward(x)
        ctx.weight, ctx.bias, ctx.store = weight, bias, store
        return F.linear(x, weight, bias)  # [..., out]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        (x,), weight, bias = ctx.saved_tensors, ctx.weight, ctx.bias
        grad_input = grad_output.matmul(weight) if ctx.needs_input_grad[0] else None  # [..., in]
        defer_weight, defer_bias = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        if defer_weight or defer_bias:
            # Detached: the entry must not keep the (freed) graph's other saved tensors alive until W.
            ctx.store.push(DeferredGrad(weight if defer_weight else None, bias if defer_bias else None,
                                        x.detach() if defer_weight else None, grad_output.detach()))
        return grad_input, None, None, None


class _BiasAddDeferredGrad(torch.autograd.Function):
    """``y + bias`` whose backward passes the gradient through and queues the bias sum."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, bias: torch.Tensor, store: WeightGradStore) -> torch.Tensor:
        ctx.bias, ctx.store = bias, store  # the parameter itself (see _LinearDeferredWeightGrad)
        return y + bias

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        ctx.store.push(DeferredGrad(None, ctx.bias, None, grad_output.detach()))
        return grad_output, None, None


class _LinearInFp32(torch.autograd.Function):
    """``F.linear`` of half-precision operands with every GEMM in fp32 (``core.device.gemm_dtype``).

    The output and the gradients keep the operands' dtypes (an fp32 input with a half-precision weight
    gives fp32 outputs: the loss's logits, never rounded to bf16), and only the input and weight are
    saved, so memory is what ``F.linear`` would use.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.bias_dtype = None if bias is None else bias.dtype
        return F.linear(x.float(), weight.float(), None if bias is None else bias.float()).to(x.dtype)  # [..., out]

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        x, weight = ctx.saved_tensors
        grad = grad_output.float().reshape(-1, grad_output.size(-1))  # [tokens, out]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = grad.mm(weight.float()).to(x.dtype).view(x.shape)  # [..., in]
        if ctx.needs_input_grad[1]:
            grad_w = grad.t().mm(x.reshape(-1, x.size(-1)).float()).to(weight.dtype)  # [out, in]
        if ctx.needs_input_grad[2]:
            grad_b = grad.sum(0).to(ctx.bias_dtype)  # [out]
        return grad_x, grad_w, grad_b


def _gemm_in_fp32(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """A half-precision operand (the input, else the weight) on a device whose half-precision GEMMs are
    slow (plain tensors only: an NF4 weight dequantises itself inside ``F.linear``)."""
    half = x if x.dtype != torch.float32 else weight
    return gemm_dtype(half) != half.dtype and type(weight) in (torch.Tensor, nn.Parameter)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
           defer_weight_grad: bool = True) -> torch.Tensor:
    """``F.linear``; inside ``defer_weight_grads`` with grad enabled, its weight gradients are deferred
    (unless ``defer_weight_grad=False``: the MoE router's and experts' products, whose weights are views
    or outside the schedule's split).

    bf16/fp16 on a CPU without half-precision matrix units multiplies in fp32 (:class:`_LinearInFp32`).
    """
    store = _active_store if defer_weight_grad else None
    if store is not None and torch.is_grad_enabled() and (_deferred(weight) or _deferred(bias)):
        return _LinearDeferredWeightGrad.apply(x, weight, bias, store)
    if _gemm_in_fp32(x, weight):
        return _LinearInFp32.apply(x, weight, bias)
    return F.linear(x, weight, bias)


def add_bias(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """``y + bias``; inside ``defer_weight_grads`` with grad enabled, the bias gradient is deferred."""
    store = _active_store
    if store is None or not torch.is_grad_enabled() or not _deferred(bias):
        return y + bias
    return _BiasAddDeferredGrad.apply(y, bias, store)


def column_parallel_input(x: torch.Tensor, group: Group, sequence_parallel: bool) -> torch.Tensor:
    """A column-parallel product's input: the full sequence ``[s, b, in]`` on every TP rank, whose gradient is
    summed over the ranks (gathered from ``[s/tp, b, in]`` under sequence parallelism)."""
    if sequence_parallel:
        return gather_from_sequence_parallel_region(x, group)  # [s/tp, b, in] -> [s, b, in]
    return copy_to_tensor_model_parallel_region(x, group)


def weight_grads_deferred() -> bool:
    """Whether products built now queue their weight gradients (inside ``defer_weight_grads``)."""
    return _active_store is not None


def column_parallel_linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], group: Group, *,
                           sequence_parallel: bool = False, gather_output: bool = False) -> torch.Tensor:
    """The column-parallel product on a given local weight ``[out/tp, in]`` (tied embeddings use it)."""
    y = linear(column_parallel_input(x, group, sequence_parallel), weight, bias)  # [s, b, out/tp]
    if gather_output:
        y = gather_from_tensor_model_parallel_region(y, group)  # [s, b, out]
    return y


class ColumnParallelLinear(nn.Module):
    """``Y = X A^T + b`` with A split along its output rows over TP.

    Input ``[s, b, in]`` (``[s/tp, b, in]`` under sequence parallelism);
    output ``[s, b, out/tp]``, or ``[s, b, out]`` with ``gather_output``.
    """

    def __init__(self, input_size: int, output_size: int, *, group: Group, bias: bool = True,
                 gather_output: bool = False, sequence_parallel: bool = False,
                 segments: Optional[Sequence[Segment]] = None, init: str = "normal",
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.group, self.gather_output, self.sequence_parallel = group, gather_output, sequence_parallel
        self.shard = TPShard(0, tuple(segments) if segments else (Segment(output_size, 1),))
        if self.shard.full_size != output_size:
            raise ValueError(f"segments sum to {self.shard.full_size}, expected {output_size}")
        self.shard.validate(group.size, f"ColumnParallelLinear({input_size}->{output_size})")
        local_out = self.shard.local_size(group.size)
        self.weight = mark_param(nn.Parameter(torch.empty(local_out, input_size, dtype=dtype, device=device)),
                                 init=init, tp_shard=self.shard)
        self.bias = None
        if bias:
            self.bias = mark_param(nn.Parameter(torch.empty(local_out, dtype=dtype, device=device)),
                                   init="zeros", tp_shard=self.shard)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.product(column_parallel_input(x, self.group, self.sequence_parallel))  # [s, b, out/tp]
        return gather_from_tensor_model_parallel_region(y, self.group) if self.gather_output else y

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """The local GEMM and bias on the whole sequence ``[s, b, in]`` -> ``[s, b, out/tp]`` (FP8 linears,
        core/quantization/fp8.py, replace it)."""
        return linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """``Y = X A^T + b`` with A split along its input columns over TP.

    Input ``[s, b, in/tp]`` (or ``[s, b, in]`` unless ``input_is_parallel``);
    output ``[s, b, out]``, or ``[s/tp, b, out]`` under sequence parallelism.
    """

    def __init__(self, input_size: int, output_size: int, *, group: Group, bias: bool = True,
                 input_is_parallel: bool = True, sequence_parallel: bool = False, init: str = "scaled_normal",
                 segments: Optional[Sequence[Segment]] = None,
                 dtype: Optional[torch.dtype] = None, device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.group, self.input_is_parallel, self.sequence_parallel = group, input_is_parallel, sequence_parallel
        self.shard = TPShard(1, tuple(segments) if segments else (Segment(input_size, 1),))
        self.shard.validate(group.size, f"RowParallelLinear({input_size}->{output_size})")
        local_in = self.shard.local_size(group.size)
        self.weight = mark_param(nn.Parameter(torch.empty(output_size, local_in, dtype=dtype, device=device)),
                                 init=init, tp_shard=self.shard)
        self.bias = None
        if bias:
            self.bias = mark_param(nn.Parameter(torch.empty(output_size, dtype=dtype, device=device)),
                                   init="zeros", grad_partial_over_tp=sequence_parallel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.input_is_parallel:
            x = scatter_to_tensor_model_parallel_region(x, self.group)
        y = self.product(x)  # [s, b, out], a partial sum over TP
        if self.sequence_parallel:
            y = reduce_scatter_to_sequence_parallel_region(y, self.group)  # [s/tp, b, out]
        else:
            y = reduce_from_tensor_model_parallel_region(y, self.group)
        return add_bias(y, self.bias) if self.bias is not None else y

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """The local GEMM ``[s, b, in/tp]`` -> ``[s, b, out]`` before the reduction over TP (FP8 linears,
        core/quantization/fp8.py, replace it)."""
        return linear(x, self.weight)


class VocabParallelEmbedding(nn.Module):
    """Word embeddings with the (padded) vocabulary split over TP.

    Input token ids ``[s, b]``; output ``[s, b, h]`` (``[s/tp, b, h]`` under
    sequence parallelism). Rows past ``vocab_size`` up to ``padded_vocab_size``
    are zero padding.
    """

    def __init__(self, vocab_size: int, padded_vocab_size: int, hidden_size: int, *, group: Group,
                 sequence_parallel: bool = False, dtype: Optional[torch.dtype] = None,
                 device: Optional[torch.device] = None) -> None:
        super().__init__()
        self.group, self.sequence_parallel = group, sequence_parallel
        self.vocab_size, self.padded_vocab_size = vocab_size, padded_vocab_size
        self.shard = TPShard.even(0, padded_vocab_size)
        self.shard.validate(group.size, "--padded vocab")
        self.per_rank = padded_vocab_size // group.size
        self.weight = mark_param(nn.Parameter(torch.empty(self.per_rank, hidden_size, dtype=dtype, device=device)),
                                 init="normal", tp_shard=self.shard, init_shape=(vocab_size, hidden_size))

    def vocab_range(self, rank: int) -> Tuple[int, int]:
        return rank * self.per_rank, (rank + 1) * self.per_rank

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.group.size == 1:
            out = F.embedding(ids, self.weight)  # [s, b, h]
        else:
            start, end = self.vocab_range(self.group.rank)
            outside = (ids < start) | (ids >= end)
            local_ids = (ids - start).masked_fill(outside, 0)
            out = F.embedding(local_ids, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)  # [s, b, h] partial
        if self.sequence_parallel:
            return reduce_scatter_to_sequence_parallel_region(out, self.group)  # [s/tp, b, h]
        return reduce_from_tensor_model_parallel_region(out, self.group)
