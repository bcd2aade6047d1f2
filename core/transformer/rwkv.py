"""RWKV-4's two token mixers (transformers' ``rwkv``): time mixing (pattern letter ``W``) and channel mixing
(``C``), each a layer with its own norm and residual, so an RWKV block is the two letters ``WC``.

Both read the previous token beside the current one, the *token shift*: ``x'_t = x_{t-1}`` (zeros before a
sequence's first token) and every projection's input is ``x * mu + x' * (1 - mu)`` with a learned ``mu`` per
channel. Time mixing (``attention`` in transformers)::

    k, v, r = key(mix_k), value(mix_v), sigmoid(receptance(mix_r))          # [s, b, a] (a: --rwkv-attention-size)
    wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t) / (sum_{i<t} e^{-(t-1-i) w + k_i} + e^{u + k_t})
    out = output(r * wkv)

with ``w = exp(time_decay)`` and ``u = time_first`` per channel; the recurrence runs in fp32 with the running
maximum of the exponents, as transformers' CPU path (state: numerator, denominator, maximum, ``[b, a]`` each):
:func:`wkv_recurrent` token by token (the reference), :func:`wkv_chunked` (what the layer runs) in chunks of 16
tokens, each chunk's exponents divided by their maximum.
Channel mixing (``feed_forward``): ``sigmoid(receptance(mix_r)) * value(relu(key(mix_k))^2)``.

Tensor parallelism: the shift and the mixes read every channel, so each rank mixes the whole hidden state
(under sequence parallelism after an all-gather of the sequence); ``key`` / ``value`` / ``receptance`` of time
mixing and ``key`` of channel mixing are column-parallel, ``output`` and channel mixing's ``value`` row-parallel,
``time_decay`` / ``time_first`` split with their channels, channel mixing's ``receptance`` column-parallel with
its output gathered (the product needs every channel). The shift and the WKV recurrence are stateful cores
(:mod:`core.transformer.sequence_state`): CP ranks pass on the last token and the WKV state, packed documents
restart both. Parameter names are transformers'.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.mappings import (gather_from_sequence_parallel_region,
                                           scatter_to_sequence_parallel_region)
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import MAMBA_INITS, split_vector
from core.transformer.sequence_state import Carry, sequence_scan

NO_EXPONENT = -1e38  # the running maximum before any token (transformers' initial max_state)


def _init_half(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    return torch.full(tuple(shape), 0.5)  # the token-shift mixes: half the current token, half the previous


def _init_time_decay(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    return torch.linspace(-5.0, 3.0, shape[0])  # RWKV's decay speeds, slow to fast over the channels


def _init_time_first(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    return torch.full(tuple(shape), math.log(0.3))


MAMBA_INITS.setdefault("rwkv_half", _init_half)
MAMBA_INITS.setdefault("rwkv_time_decay", _init_time_decay)
MAMBA_INITS.setdefault("rwkv_time_first", _init_time_first)


def token_shift_core(x: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
    """The previous token of each of ``x`` ``[b, s, c]`` (zeros, or the carried last token, before the first);
    carry = (the last token ``[b, 1, c]``,)."""
    previous = x.new_zeros(x.size(0), 1, x.size(2)) if carry is None else carry[0].to(x.dtype)
    return torch.cat([previous, x[:, :-1]], dim=1), (x[:, -1:],)


def _wkv_start(k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The WKV state before a sequence's first token: zero numerator and denominator ``[b, c]``, no exponent yet."""
    numerator = k.new_zeros(k.size(0), k.size(2))
    return numerator, torch.zeros_like(numerator), torch.full_like(numerator, NO_EXPONENT)


def wkv_recurrent(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                  state: Optional[Tuple[torch.Tensor, ...]] = None
                  ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """RWKV-4's WKV over k, v ``[b, s, c]`` (fp32, token by token, the exponents' running maximum subtracted),
    from ``state`` = (numerator, denominator, maximum) ``[b, c]`` each (None: a start). Returns ``[b, s, c]``
    (fp32) and the state after the last token."""
    k, v = k.float(), v.float()
    decay, first = -torch.exp(time_decay.float()), time_first.float()
    numerator, denominator, maximum = _wkv_start(k) if state is None else state
    outputs = []
    for t in range(k.size(1)):
        key, value = k[:, t], v[:, t]
        top = torch.maximum(maximum, key + first)
        old, new = torch.exp(maximum - top), torch.exp(key + first - top)
        outputs.append((old * numerator + new * value) / (old * denominator + new))
        top = torch.maximum(maximum + decay, key)
        old, new = torch.exp(maximum + decay - top), torch.exp(key - top)
        numerator, denominator, maximum = old * numerator + new * value, old * denominator + new, top
    return torch.stack(outputs, dim=1), (numerator, denominator, maximum)


WKV_CHUNK = 16  # tokens per chunk of wkv_chunked: its pairwise exponents are [chunk, chunk] per channel


def wkv_chunked(time_decay: torch.Tensor, time_first: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                state: Optional[Tuple[torch.Tensor, ...]] = None, chunk: int = WKV_CHUNK
                ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """:func:`wkv_recurrent` in chunks of ``chunk`` tokens, same arguments and results. Within a chunk, token ``t``
    weighs an earlier token ``i`` of it by ``e^{-(t-1-i) w + k_i}``, itself by ``e^{u + k_t}`` and the state entering
    the chunk by ``e^{p - t w}``; all of them are divided by their maximum, so nothing overflows, and the state
    leaving the chunk is the entering one decayed ``chunk`` steps plus each token's ``e^{-(L-1-i) w + k_i}``. The
    decay is per channel, so a chunk's work is elementwise ``[chunk, chunk]`` per channel (no matmul): the chunks
    trade ``chunk`` x the elementwise work for ``1 / chunk`` of the sequential steps."""
    k, v = k.float(), v.float()  # [b, s, c]
    rate, first = torch.exp(time_decay.float()), time_first.float()  # w, u [c]
    numerator, denominator, maximum = _wkv_start(k) if state is None else state
    outputs = []
    for start in range(0, k.size(1), max(chunk, 1)):
        keys, values = k[:, start:start + chunk], v[:, start:start + chunk]  # [b, L, c]
        length = keys.size(1)
        steps = torch.arange(length, dtype=torch.float32, device=k.device)
        earlier = steps[None, :] < steps[:, None]  # [t, i]: i < t
        lag = (steps[:, None] - 1 - steps[None, :])[None, :, :, None]  # [1, t, i, 1]
        past = torch.where(earlier[None, :, :, None], -lag * rate + keys[:, None],
                           torch.full((), float("-inf"), device=k.device))  # [b, t, i, c]
        carried = maximum[:, None] - steps[None, :, None] * rate  # [b, L, c]
        current = first + keys
        top = torch.maximum(torch.maximum(carried, current), past.amax(dim=2))  # [b, L, c]
        past_weight = torch.exp(past - top[:, :, None])
        carried_weight, current_weight = torch.exp(carried - top), torch.exp(current - top)
        outputs.append((carried_weight * numerator[:, None] + (past_weight * values[:, None]).sum(2)
                        + current_weight * values)
                       / (carried_weight * denominator[:, None] + past_weight.sum(2) + current_weight))
        to_end = -(length - 1 - steps)[None, :, None] * rate + keys  # each token's exponent after the chunk
        entering = maximum - length * rate
        new_maximum = torch.maximum(entering, to_end.amax(dim=1))  # [b, c]
        written, kept = torch.exp(to_end - new_maximum[:, None]), torch.exp(entering - new_maximum)
        numerator = kept * numerator + (written * values).sum(1)
        denominator = kept * denominator + written.sum(1)
        maximum = new_maximum
    return torch.cat(outputs, dim=1), (numerator, denominator, maximum)


class _ShiftedInputs(nn.Module):
    """What both mixers share: the whole sequence of the layer's normed input and its token shift."""

    def _full_and_shifted(self, hidden: torch.Tensor, layout: Optional[SequenceLayout]
                          ) -> Tuple[torch.Tensor, torch.Tensor]:
        # hidden [s, b, h] ([s/tp, b, h] under SP) -> (x, x') [s, b, h] over this rank's full sequence
        if layout is not None and layout.cache is not None:
            raise ValueError("RWKV layers keep no KV cache of their shift and state; generate by recomputing "
                             "(use_cache=False)")
        if self.config.sequence_parallel:  # every rank mixes the whole sequence: its gradient is whole, split back
            hidden = gather_from_sequence_parallel_region(hidden, self.group, output_grad_is_partial=False)
        shifted = sequence_scan(token_shift_core, hidden.transpose(0, 1), layout).transpose(0, 1)
        return hidden, shifted

    @staticmethod
    def _mix(x: torch.Tensor, shifted: torch.Tensor, mu: torch.Tensor) -> torch.Tensor:
        return x * mu[0] + shifted * (1 - mu[0])  # mu [1, 1, h] as transformers stores it


def _mix_param(config: TransformerConfig) -> nn.Parameter:
    """A replicated token-shift mix ``[1, 1, h]``: every rank mixes every token, so its gradient is whole."""
    return mark_param(nn.Parameter(torch.empty(1, 1, config.hidden_size, dtype=config.params_dtype)),
                      init="rwkv_half")


class RwkvTimeMix(_ShiftedInputs):
    """RWKV-4's time mixing (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        hidden, size, dtype = config.hidden_size, config.rwkv_attention_size_or_default, config.params_dtype
        channels = Segment(size)
        for name in ("key", "value", "receptance"):
            setattr(self, name, ColumnParallelLinear(hidden, size, group=self.group, bias=False, segments=(channels,),
                                                     dtype=dtype))
        self.output = RowParallelLinear(size, hidden, group=self.group, bias=False,
                                        sequence_parallel=config.sequence_parallel, segments=(channels,), dtype=dtype)
        shard = TPShard(0, (channels,))
        self.time_decay = split_vector(shard, self.group.size, "rwkv_time_decay", dtype)  # [a/tp]
        self.time_first = split_vector(shard, self.group.size, "rwkv_time_first", dtype)  # [a/tp]
        self.time_mix_key, self.time_mix_value, self.time_mix_receptance = (_mix_param(config) for _ in range(3))

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        x, shifted = self._full_and_shifted(hidden, layout)  # [s, b, h]
        k = self.key(self._mix(x, shifted, self.time_mix_key))  # [s, b, a/tp]
        v = self.value(self._mix(x, shifted, self.time_mix_value))
        r = torch.sigmoid(self.receptance(self._mix(x, shifted, self.time_mix_receptance)))
        wkv = sequence_scan(self._core, torch.cat([k, v], dim=-1).transpose(0, 1), layout).transpose(0, 1)
        return self.output((r.float() * wkv).to(r.dtype))  # [s, b, h] ([s/tp, b, h] under SP)

    def _core(self, kv: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """WKV of ``kv`` ``[b, s, 2 a/tp]`` (k then v) from ``carry`` = its (numerator, denominator, maximum)."""
        k, v = kv.chunk(2, dim=-1)
        return wkv_chunked(self.time_decay, self.time_first, k, v, carry)


class RwkvChannelMix(_ShiftedInputs):
    """RWKV-4's channel mixing (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        hidden, ffn, dtype = config.hidden_size, config.ffn_hidden_size, config.params_dtype
        self.key = ColumnParallelLinear(hidden, ffn, group=self.group, bias=False, segments=(Segment(ffn),),
                                        dtype=dtype)
        self.value = RowParallelLinear(ffn, hidden, group=self.group, bias=False,
                                       sequence_parallel=config.sequence_parallel, segments=(Segment(ffn),),
                                       dtype=dtype)
        self.receptance = ColumnParallelLinear(hidden, hidden, group=self.group, bias=False, gather_output=True,
                                               segments=(Segment(hidden),), dtype=dtype)
        self.time_mix_key, self.time_mix_receptance = _mix_param(config), _mix_param(config)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        x, shifted = self._full_and_shifted(hidden, layout)  # [s, b, h]
        value = self.value(torch.square(F.relu(self.key(self._mix(x, shifted, self.time_mix_key)))))
        receptance = torch.sigmoid(self.receptance(self._mix(x, shifted, self.time_mix_receptance)))  # [s, b, h]
        if self.config.sequence_parallel:  # the value is this rank's part of the sequence: take the same part
            receptance = scatter_to_sequence_parallel_region(receptance, self.group)
        return receptance * value  # [s, b, h] ([s/tp, b, h] under SP)
