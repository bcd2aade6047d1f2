"""Griffin's recurrent block (RecurrentGemma, Hawk): a gated branch beside a conv and a real-gated linear
recurrent unit (RG-LRU), in place of attention.

For a layer input ``x`` ``[s, b, h]`` and the recurrence width ``w`` (``--lru-width``, default ``h``)::

    y = gelu_tanh(linear_y(x))                  # [s, b, w]
    u = conv(linear_x(x))                       # causal depthwise conv of width --lru-conv-width, with bias
    i_t = sigmoid(u_t W_i + b_i),  r_t = sigmoid(u_t W_r + b_r)      # block-diagonal: one w/H block per head
    log a_t = -8 r_t softplus(lambda)           # a_t in (0, 1), per channel
    h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (i_t u_t)                   # fp32 state [b, w]
    out = linear_out(h * y)

with ``H`` = ``--num-attention-heads`` gate blocks (transformers' ``RecurrentGemmaRglru``). At a sequence's first
token the state restarts: ``a`` is 0 there and the input is not scaled (transformers resets where the
position is 0). The square root's gradient is clipped at 1000 (``d sqrt(x) = 1 / sqrt(max(4x, 1e-6))``), as
Griffin's reference does, so training steps match too. Parameter names are transformers' (``linear_y``,
``linear_x``, ``conv_1d``, ``rg_lru.{recurrent_param, input_gate_weight, input_gate_bias, recurrent_gate_weight,
recurrent_gate_bias}``, ``linear_out``), every linear with its bias.

Two forms of the recurrence: :func:`rg_lru_recurrent`, one token after the other (the reference), and
:func:`rg_lru_chunked` (what the block runs), chunks of 64 tokens in which ``h_t = A_t h_0 + sum_s (A_t / A_s)
x_s`` with ``A`` the cumulative product of ``a`` (log space, masked causal), the state carried between
chunks; they agree to rounding, forward and backward.

Tensor parallelism splits the ``w`` channels by gate blocks: ``linear_y`` and ``linear_x`` are
column-parallel, the conv, the gates' blocks and ``lambda`` follow their channels, ``linear_out`` is
row-parallel (its bias added once, after the sum). Under sequence parallelism the input is ``[s/tp, b, h]``.
What runs along the sequence (the conv, the gates and the recurrence) is the stateful core
(:mod:`core.transformer.sequence_state`): its carry is the conv's last ``k - 1`` inputs and the fp32 state, so
context-parallel ranks relay it and packed documents restart it.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import MAMBA_INITS, carried_causal_conv, split_vector
from core.transformer.sequence_state import Carry, sequence_scan

MAX_SQRT_GRADIENT = 1000.0  # Griffin's bound on d sqrt(x) / dx
GATE_LOG_SCALE = -8.0  # log a = -8 r softplus(lambda)
A_INIT_RANGE = (0.9, 0.999)  # Griffin's initial a (its square drawn uniformly between these squares)
RECURRENCE_CHUNK = 64  # tokens per chunk of rg_lru_chunked (the result does not depend on it)


class _SqrtBoundedGradient(torch.autograd.Function):
    """``sqrt(x)`` whose gradient ``1 / (2 sqrt(x))`` is clipped at :data:`MAX_SQRT_GRADIENT`."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(x)
        return torch.sqrt(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return grad / torch.sqrt(torch.clamp(4.0 * x, min=1.0 / MAX_SQRT_GRADIENT ** 2))


def _init_recurrent_param(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """``lambda`` with ``softplus(lambda) = -log a``, ``a^2`` uniform in Griffin's range."""
    low, high = (bound ** 2 for bound in A_INIT_RANGE)
    a = torch.sqrt(torch.empty(shape).uniform_(low, high, generator=generator))
    return torch.log(1.0 / a - 1.0)  # softplus^-1(-log a)


MAMBA_INITS.setdefault("rg_lru_recurrent_param", _init_recurrent_param)


def rg_lru_recurrent(x: torch.Tensor, log_a: torch.Tensor,
                     initial_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``h_t = exp(log_a_t) h_{t-1} + x_t`` token by token in fp32 from ``initial_state`` (None: zeros).

    x, log_a ``[b, s, w]``; initial_state ``[b, w]``. Returns ``h`` ``[b, s, w]`` (fp32) and the last state.
    """
    x, a = x.float(), torch.exp(log_a.float())
    state = x.new_zeros(x.size(0), x.size(2)) if initial_state is None else initial_state.float()
    outputs = []
    for t in range(x.size(1)):
        state = a[:, t] * state + x[:, t]
        outputs.append(state)
    return torch.stack(outputs, dim=1), state


def rg_lru_chunked(x: torch.Tensor, log_a: torch.Tensor, initial_state: Optional[torch.Tensor] = None,
                   chunk: int = 64) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`rg_lru_recurrent` in chunks: within one, ``h_t = exp(L_t) h_0 + sum_{s <= t} exp(L_t - L_s) x_s``
    (``L`` the chunk's cumulative ``log_a``); the state passes from chunk to chunk. Same shapes."""
    x, log_a = x.float(), log_a.float()
    state = x.new_zeros(x.size(0), x.size(2)) if initial_state is None else initial_state.float()
    outputs = []
    for start in range(0, x.size(1), max(chunk, 1)):
        xs, cumulative = x[:, start:start + chunk], torch.cumsum(log_a[:, start:start + chunk], dim=1)  # [b, c, w]
        length = xs.size(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()  # [t, s]
        gaps = (cumulative[:, :, None] - cumulative[:, None, :]).masked_fill(~causal[None, :, :, None], -math.inf)
        within = torch.einsum("btsw,bsw->btw", torch.exp(gaps), xs)  # [b, c, w]
        outputs.append(within + torch.exp(cumulative) * state[:, None])
        state = outputs[-1][:, -1]
    return torch.cat(outputs, dim=1), state


class RecurrentBlock(nn.Module):
    """Griffin's recurrent block (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype, hidden = self.group.size, config.params_dtype, config.hidden_size
        width, heads = config.lru_width_or_default, config.num_attention_heads
        self.block_width, self.local_heads = width // heads, heads // tp
        blocks = Segment(heads, self.block_width)
        common = dict(group=self.group, bias=True, sequence_parallel=config.sequence_parallel, segments=(blocks,),
                      dtype=dtype)
        self.linear_y = ColumnParallelLinear(hidden, width, **common)
        self.linear_x = ColumnParallelLinear(hidden, width, **common)
        channels = TPShard(0, (blocks,))
        local = channels.local_size(tp)
        self.conv_1d = nn.Conv1d(local, local, config.lru_conv_width, groups=local, bias=True, dtype=dtype)
        mark_param(self.conv_1d.weight, init="normal", tp_shard=channels)
        mark_param(self.conv_1d.bias, init="zeros", tp_shard=channels)
        self.rg_lru = nn.Module()
        per_head = TPShard.even(0, heads)
        self.rg_lru.recurrent_param = split_vector(channels, tp, "rg_lru_recurrent_param", dtype)  # [w/tp]
        for gate in ("input_gate", "recurrent_gate"):  # [H/tp, w/H, w/H] blocks and [H/tp, w/H] biases
            setattr(self.rg_lru, f"{gate}_weight",
                    split_vector(per_head, tp, "normal", dtype, self.block_width, self.block_width))
            setattr(self.rg_lru, f"{gate}_bias", split_vector(per_head, tp, "zeros", dtype, self.block_width))
        self.linear_out = RowParallelLinear(width, hidden, group=self.group, bias=True,
                                            sequence_parallel=config.sequence_parallel, segments=(blocks,),
                                            dtype=dtype)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        if layout is not None and layout.cache is not None:
            raise ValueError("RG-LRU layers keep no KV cache of their state; generate by recomputing "
                             "(use_cache=False)")
        gate = F.gelu(self.linear_y(hidden), approximate="tanh")  # [s, b, w/tp] over the full sequence
        x = self.linear_x(hidden).transpose(0, 1)  # [b, s, w/tp]
        recurrent = sequence_scan(self._core, x, layout).transpose(0, 1)  # [s, b, w/tp] fp32
        return self.linear_out((recurrent * gate.float()).to(gate.dtype))  # [s, b, h] ([s/tp, b, h] under SP)

    def _gate(self, u: torch.Tensor, name: str) -> torch.Tensor:
        """``sigmoid(u W + b)`` with one block per head: u ``[b, s, w/tp]`` -> ``[b, s, w/tp]``."""
        weight, bias = getattr(self.rg_lru, f"{name}_weight"), getattr(self.rg_lru, f"{name}_bias")
        blocks = u.view(*u.shape[:2], self.local_heads, self.block_width)  # [b, s, H/tp, w/H]
        return torch.sigmoid(torch.einsum("bshi,hij->bshj", blocks, weight) + bias).flatten(2)

    def _core(self, x: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """conv, gates and the recurrence of ``x`` ``[b, s, w/tp]`` (``linear_x``'s output) from ``carry`` =
        (conv inputs ``[b, k-1, w/tp]``, state ``[b, w/tp]`` fp32); None: a sequence start, where ``a`` is 0
        and the input unscaled. Returns ``h`` ``[b, s, w/tp]`` (fp32)."""
        previous, state = carry if carry is not None else (None, None)
        u, last_inputs = carried_causal_conv(x, self.conv_1d.weight, self.conv_1d.bias, previous)  # [b, s, w/tp]
        input_gate, recurrent_gate = self._gate(u, "input_gate"), self._gate(u, "recurrent_gate")
        log_a = GATE_LOG_SCALE * recurrent_gate * F.softplus(self.rg_lru.recurrent_param)  # [b, s, w/tp]
        scale = _SqrtBoundedGradient.apply(1.0 - torch.exp(2.0 * log_a))
        if carry is None:  # the first token starts the state: no decay of a previous one, its input unscaled
            scale = torch.cat([torch.ones_like(scale[:, :1]), scale[:, 1:]], dim=1)
        h, state = rg_lru_chunked(u * input_gate * scale.to(u.dtype), log_a, state, RECURRENCE_CHUNK)
        return h, (last_inputs, state)
