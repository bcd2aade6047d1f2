"""The short-convolution token mixer of LFM2: a gated causal depthwise conv in place of attention.

``in_proj`` maps the hidden state to three pieces ``[B; C; x]`` of ``hidden`` channels each;
the product ``B * x`` runs through a causal depthwise conv of width ``--short-conv-kernel-size``
(LFM2's ``conv_L_cache``) and the output is gated by ``C``::

    y = out_proj(C * conv(B * x))

There is no activation and no norm; ``--short-conv-bias`` (LFM2's ``conv_bias``) gives
``in_proj``, the conv and ``out_proj`` their biases together. Parameter names are those of
``transformers``' ``Lfm2ShortConv`` (``in_proj``, ``conv``, ``out_proj``).

Tensor parallelism splits the ``hidden`` channels: ``in_proj`` is column-parallel with one
:class:`Segment` per piece (each rank holds its channels of ``B``, ``C`` and ``x``), the conv's
channels follow them and ``out_proj`` is row-parallel. Under sequence parallelism the input is
``[s/tp, b, h]``: ``in_proj`` all-gathers the sequence and ``out_proj`` reduce-scatters it.

The conv is the mixer's only work along the sequence: it is the stateful core
(:mod:`core.transformer.sequence_state`) whose carry is the conv's last ``k - 1`` inputs, so a
sequence cut in pieces, or packed documents restarting from zeros, give the outputs they give whole
or alone.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import causal_conv_core
from core.transformer.sequence_state import Carry, sequence_scan


class ShortConv(nn.Module):
    """LFM2's short-conv mixer; ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        hidden, bias, dtype = config.hidden_size, config.short_conv_bias, config.params_dtype
        channels = Segment(hidden)
        self.in_proj = ColumnParallelLinear(hidden, 3 * hidden, group=self.group, bias=bias,
                                            sequence_parallel=config.sequence_parallel,
                                            segments=(channels, channels, channels), dtype=dtype)  # [B; C; x]
        conv_shard = TPShard(0, (channels,))
        local = conv_shard.local_size(self.group.size)
        self.kernel_size = config.short_conv_kernel_size
        self.conv = nn.Conv1d(local, local, self.kernel_size, groups=local, bias=bias, dtype=dtype)  # [h/tp, 1, k]
        mark_param(self.conv.weight, init="normal", tp_shard=conv_shard)
        if self.conv.bias is not None:
            mark_param(self.conv.bias, init="zeros", tp_shard=conv_shard)
        self.out_proj = RowParallelLinear(hidden, hidden, group=self.group, bias=bias,
                                          sequence_parallel=config.sequence_parallel, segments=(channels,),
                                          dtype=dtype)

    def _core(self, inputs: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """The causal conv of ``inputs`` ``[b, s, h/tp]`` (``B * x``) after the inputs in ``carry``."""
        return causal_conv_core(self.conv.weight, self.conv.bias)(inputs, carry)  # [b, s, h/tp], (last inputs,)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        if layout is not None and layout.cache is not None:
            raise ValueError("short-conv layers keep no KV cache of their conv inputs; generate by recomputing "
                             "(use_cache=False)")
        projected = self.in_proj(hidden).transpose(0, 1)  # [b, s, 3h/tp] over the full sequence
        gate_in, gate_out, x = projected.chunk(3, dim=-1)  # HF's B, C, x: [b, s, h/tp] each
        conv = sequence_scan(self._core, gate_in * x, layout)  # [b, s, h/tp]
        return self.out_proj((gate_out * conv).transpose(0, 1))  # [s, b, h] ([s/tp, b, h] under SP)
