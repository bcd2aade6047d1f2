"""Kimi Delta Attention (KDA), the linear-attention token mixer of Kimi Linear (``kimi_linear``).

KDA is the gated DeltaNet (:mod:`core.transformer.gated_delta_net`) with a forget gate per key channel
instead of per head, and with low-rank gates. For each token ``x``::

    q, k, v = silu(conv([W_q x; W_k x; W_v x]))          a short causal depthwise conv, no bias
    beta    = sigmoid(W_b x)                                 [h_v]      how much of the error is written
    g       = -exp(A_log) * softplus(W_fb W_fa x + dt_bias)  [h_v, dk]  the log decay of each key channel
    o       = kimi_delta_rule(q, k, v, g, beta)              [h_v, dv]  (q, k L2-normalised, q scaled)
    y       = W_o (o_norm(o) * sigmoid(W_gb W_ga x))         the output gated per channel

``W_fa`` and ``W_ga`` are rank-``dk`` / rank-``dv`` down projections (transformers' ``f_a_proj``,
``g_a_proj``), ``W_fb`` / ``W_gb`` map them up to every head's channels; ``o_norm`` is an RMSNorm over
``dv`` with one weight shared by every head. Bailing's hybrids (``bailing_hybrid``) project both gates at full
rank (``--kda-full-rank-gates``: ``W_f x``, ``W_g x``, transformers' ``f_proj``, ``g_proj``) and may bound the forget
gate (``--kda-gate-lower-bound L``: ``g = L * sigmoid(exp(A_log) * (W_f x + dt_bias))``, in ``(L, 0)``).
The conv and the delta rule are the stateful core (:mod:`core.transformer.sequence_state`; carry = the conv's
last ``k - 1`` inputs and the fp32 state ``[b, h_v, dk, dv]``), so packed documents restart at every document
and CP ranks pass the state on.

Tensor parallelism splits the key heads with their value-head groups. Every projection of the hidden
state is one column-parallel ``in_proj`` with rows ``[q; k; v; b; f_a; g_a]``: the first four split by
heads, the two down projections replicated on every rank (a :class:`Segment` of one unit); full-rank gates
are rows ``[f; g]`` split with their heads instead, and need no up projections. A rank's
copy of ``f_a`` / ``g_a`` feeds only its own heads' up projections, so its gradient, and its share of the
input's gradient, are partial sums over TP: the replicas' gradients are summed as GQA's replicated key
heads are, and the column-parallel input gradient is all-reduced as usual. The up projections, the conv
channels, ``dt_bias`` and ``A_log`` split with their heads, ``o_proj`` is row-parallel, and the norm's
weight is replicated with a partial gradient (``grad_partial_over_tp``). Under sequence parallelism
``in_proj`` all-gathers the sequence and ``o_proj`` reduce-scatters it.

The converter (``mindspeed_llm/models/families/kimi_linear.py``) fuses the checkpoint's ``q_proj``, ``k_proj``,
``v_proj``, ``b_proj``, ``f_a_proj`` and ``g_a_proj`` into ``in_proj`` and its ``q_conv1d``, ``k_conv1d`` and
``v_conv1d`` into ``conv1d`` (``fuse_rows``); the other tensors keep their names.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.gated_delta_net import kimi_delta_rule
from core.transformer.mamba_mixer import carried_causal_conv, split_vector
from core.transformer.norms import RMSNorm
from core.transformer.sequence_state import Carry, sequence_scan


def _up_projection(rank: int, heads: int, unit: int, tp: int, dtype: Optional[torch.dtype]) -> nn.Linear:
    """A low-rank gate's up projection ``[heads x unit, rank]``, this rank's heads' rows (input replicated)."""
    shard = TPShard(0, (Segment(heads, unit),))
    up = nn.Linear(rank, shard.local_size(tp), bias=False, dtype=dtype)
    mark_param(up.weight, init="normal", tp_shard=shard)
    return up


class KimiDeltaAttention(nn.Module):
    """Kimi Linear's KDA mixer (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype = self.group.size, config.params_dtype
        key_heads, value_heads = config.linear_num_key_heads, config.linear_num_value_heads
        key_dim, value_dim = config.linear_key_head_dim, config.linear_value_head_dim
        self.key_dim, self.value_dim = key_dim, value_dim
        self.local_value_heads = value_heads // tp
        self.chunk_size = config.linear_chunk_size
        self.full_rank_gates = config.kda_full_rank_gates
        gates = ((Segment(value_heads, key_dim), Segment(value_heads, value_dim)) if self.full_rank_gates
                 else (Segment(1, key_dim), Segment(1, value_dim)))  # [f; g] per head, or the shared [f_a; g_a]
        segments = (Segment(key_heads, key_dim), Segment(key_heads, key_dim), Segment(value_heads, value_dim),
                    Segment(value_heads)) + gates  # [q; k; v; b; f(_a); g(_a)]
        self.in_proj = ColumnParallelLinear(config.hidden_size, sum(seg.size for seg in segments), group=self.group,
                                            bias=False, sequence_parallel=config.sequence_parallel,
                                            segments=segments, dtype=dtype)
        self.in_split = [seg.local_units(tp) * seg.unit_size for seg in segments]
        conv_shard = TPShard(0, segments[:3])  # [q; k; v]
        self.conv_channels = conv_shard.local_size(tp)
        self.conv1d = nn.Conv1d(self.conv_channels, self.conv_channels, config.linear_conv_kernel_dim,
                                groups=self.conv_channels, bias=False, dtype=dtype)
        mark_param(self.conv1d.weight, init="normal", tp_shard=conv_shard)
        if not self.full_rank_gates:
            self.f_b_proj = _up_projection(key_dim, value_heads, key_dim, tp, dtype)  # [hv/tp * dk, dk]
            self.g_b_proj = _up_projection(value_dim, value_heads, value_dim, tp, dtype)  # [hv/tp * dv, dv]
        # flash-linear-attention's initialisation (Mamba's): dt log-uniform in [1e-3, 1e-1], A uniform in [1, 16]
        self.dt_bias = split_vector(TPShard(0, (Segment(value_heads, key_dim),)), tp, "mamba_dt_bias",
                                    dtype)  # [hv/tp * dk]
        self.A_log = split_vector(TPShard.even(0, value_heads), tp, "mamba_a_log_uniform", dtype)  # [hv/tp]
        self.o_norm = RMSNorm(value_dim, config.norm_epsilon, grad_partial_over_tp=True, dtype=dtype,
                              fused=config.use_fused_rmsnorm)
        self.o_proj = RowParallelLinear(value_heads * value_dim, config.hidden_size, group=self.group, bias=False,
                                        sequence_parallel=config.sequence_parallel,
                                        segments=(Segment(value_heads, value_dim),), dtype=dtype)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        qkv_b_f_g = self.in_proj(hidden)  # [s, b, local rows] over the full sequence
        seq, batch = qkv_b_f_g.shape[:2]
        *core_parts, forget_rank, gate_rank = qkv_b_f_g.split(self.in_split, dim=-1)
        forget = forget_rank if self.full_rank_gates else self.f_b_proj(forget_rank)  # [s, b, hv/tp * dk]
        core_in = torch.cat([*core_parts, forget], dim=-1).transpose(0, 1)  # [b, s, c + hv/tp + hv/tp * dk]
        core_out = sequence_scan(self._core, core_in, layout)  # [b, s, hv/tp * dv]
        out = core_out.transpose(0, 1).reshape(seq, batch, self.local_value_heads, self.value_dim)
        gate = (gate_rank if self.full_rank_gates else self.g_b_proj(gate_rank)).reshape(
            seq, batch, self.local_value_heads, self.value_dim)
        gated = self.o_norm(out.float()) * torch.sigmoid(gate.float())  # the norm in fp32, as transformers
        return self.o_proj(gated.to(qkv_b_f_g.dtype).reshape(seq, batch, -1))  # [s, b, h] ([s/tp, b, h] SP)

    def _core(self, inputs: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """conv + SiLU, beta and the per-channel decay, the delta rule: inputs ``[b, s, c + hv/tp + hv/tp dk]``
        -> ``[b, s, hv/tp * dv]``; carry = (conv inputs ``[b, k-1, c]``, state ``[b, hv/tp, dk, dv]`` fp32)."""
        batch, seq = inputs.shape[:2]
        heads = self.local_value_heads
        mixed, beta_logits, forget = inputs.split([self.conv_channels, heads, heads * self.key_dim], dim=-1)
        conv_past, state = carry if carry is not None else (None, None)
        mixed, conv_past = carried_causal_conv(mixed, self.conv1d.weight, None, conv_past, silu=True)
        q, k, v = mixed.split(self.in_split[:3], dim=-1)
        beta = torch.sigmoid(beta_logits.float())  # [b, s, hv/tp]
        decay_in = (forget.float() + self.dt_bias.float()).view(batch, seq, heads, self.key_dim)
        rate, bound = torch.exp(self.A_log.float())[:, None], self.config.kda_gate_lower_bound
        if bound is None:
            g = -rate * F.softplus(decay_in)  # [b, s, hv/tp, dk]
        else:  # the bounded gate, in (bound, 0)
            g = bound * torch.sigmoid(rate * decay_in)
        out, state = kimi_delta_rule(q.reshape(batch, seq, -1, self.key_dim), k.reshape(batch, seq, -1, self.key_dim),
                                     v.reshape(batch, seq, heads, self.value_dim), g, beta, self.chunk_size, state)
        return out.reshape(batch, seq, -1), (conv_past, state)
