"""The mLSTM, xLSTM's matrix-memory token mixer (transformers' ``xlstm``, NX-AI's xLSTM-7B): pattern letter ``X``,
or ``--experimental-attention-variant mlstm`` with ``--linear-attention-freq``.

Per head the memory is a ``[dk, dv]`` matrix ``C`` with a normaliser ``n`` ``[dk]``, written through an
exponential input gate and a sigmoid forget gate, read by the query::

    C_t = f_t C_{t-1} + i_t k_t v_t^T        n_t = f_t n_{t-1} + i_t k_t       (f_t = sigmoid(f~_t), i_t = exp(i~_t))
    h_t = (q_t C_t) / (max(|q_t . n_t|, 1) + eps)                              (q scaled by dk^-1/2)

The exponential gate overflows unless stabilised: the state is kept scaled by ``exp(-m_t)``, where the running
maximum ``m_t = max(log f_t + m_{t-1}, i~_t)`` starts at 0, which turns the read into
``h_t = (q_t C'_t) / (max(|q_t . n'_t|, exp(-m_t)) + eps)`` (the stabiliser reaches the result only through
``eps``, so it is transformers' exactly, ``m_0 = 0`` included). The state ``(C', n', m)`` is fp32.

:func:`mlstm_chunked` (what the layer runs) takes chunks of ``--linear-chunk-size`` tokens: within a chunk of
cumulative log forget gates ``b``, the weight of token ``j`` at token ``t >= j`` is ``exp(b_t - b_j + i~_j)``
and the state entering the chunk weighs ``exp(b_t + m)``; ``m_t`` is the maximum of these exponents, the same
value the recurrence reaches, so the two forms agree to rounding, forward and backward. Memory is
``[chunk, chunk]`` per head and chunk: linear in the sequence. :func:`mlstm_recurrent` is the definition, token by
token, for the tests.

The mixer around the cell (transformers' ``xLSTMLayer``)::

    q, k, v, o = W_qkvo x                       (transformers' q, k, v, ogate_preact: [q; k; v; o] rows)
    i~, f~     = cap * tanh((W_if x + b_if) / cap)  (igate_preact, fgate_preact, biased; --mlstm-gate-soft-cap)
    h          = mlstm(q, k, v, i~, f~)         [heads, dv] per token
    y          = W_out (sigmoid(o) * layer_norm_per_head(h) * w)

Tensor parallelism splits the heads: ``in_proj`` ``[q; k; v; o]`` and ``gate_proj`` ``[i; f]`` are column-parallel
by head, ``out_proj`` row-parallel, the per-head norm's weight splits with its heads (each rank normalises its own
heads: no reduction). Under sequence parallelism the column-parallel projections all-gather the sequence and
``out_proj`` reduce-scatters it. The recurrence is the stateful core (:mod:`core.transformer.sequence_state`;
carry = ``(C', n', m)``), so packed documents restart at every document and CP ranks pass the state on.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import MAMBA_INITS, split_vector
from core.transformer.sequence_state import Carry, sequence_scan

MLstmState = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # C' [b, h, dk, dv], n' [b, h, dk], m [b, h] (fp32)


def _init_gate_bias(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """The ``[i; f]`` gate biases ``[2 heads]``: input gates at -10 (nearly closed), forget gates from 3 to 6 over
    the heads (slow to very slow forgetting), as xLSTM initialises them."""
    heads = shape[0] // 2
    return torch.cat([torch.full((heads,), -10.0), torch.linspace(3.0, 6.0, heads)])


MAMBA_INITS.setdefault("mlstm_gate_bias", _init_gate_bias)


def soft_cap(values: torch.Tensor, cap: Optional[float]) -> torch.Tensor:
    """``cap * tanh(values / cap)`` (None: unchanged)."""
    return values if cap is None else cap * torch.tanh(values / cap)


def _zero_state(q: torch.Tensor, v: torch.Tensor) -> MLstmState:
    batch, _, heads, dk = q.shape
    return (q.new_zeros(batch, heads, dk, v.size(-1), dtype=torch.float32),
            q.new_zeros(batch, heads, dk, dtype=torch.float32), q.new_zeros(batch, heads, dtype=torch.float32))


def mlstm_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, igate: torch.Tensor, fgate: torch.Tensor,
                    state: Optional[MLstmState] = None, eps: float = 1e-6) -> Tuple[torch.Tensor, MLstmState]:
    """The stabilised mLSTM token by token in fp32: q, k ``[b, s, h, dk]``, v ``[b, s, h, dv]``, the gate
    pre-activations ``[b, s, h]``, from ``state`` (None: zeros, ``m = 0``). Returns ``[b, s, h, dv]`` (fp32) and the
    state after the last token."""
    q32, k32, v32 = q.float() * q.size(-1) ** -0.5, k.float(), v.float()
    log_f, log_i = F.logsigmoid(fgate.float()), igate.float()
    memory, normaliser, maximum = _zero_state(q, v) if state is None else state
    outputs = []
    for t in range(q.size(1)):
        top = torch.maximum(log_f[:, t] + maximum, log_i[:, t])  # [b, h]
        keep, write = torch.exp(log_f[:, t] + maximum - top), torch.exp(log_i[:, t] - top)
        written = k32[:, t, :, :, None] * v32[:, t, :, None, :]  # k v^T [b, h, dk, dv]
        memory = keep[..., None, None] * memory + write[..., None, None] * written
        normaliser = keep[..., None] * normaliser + write[..., None] * k32[:, t]
        maximum = top
        numerator = torch.einsum("bhk,bhkv->bhv", q32[:, t], memory)
        denominator = torch.einsum("bhk,bhk->bh", q32[:, t], normaliser)
        outputs.append(numerator / (torch.maximum(denominator.abs(), torch.exp(-maximum)) + eps)[..., None])
    return torch.stack(outputs, dim=1), (memory, normaliser, maximum)


def _chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_i: torch.Tensor, log_f: torch.Tensor,
           state: MLstmState, eps: float) -> Tuple[torch.Tensor, MLstmState]:
    """One chunk, heads first: q (scaled), k ``[b, h, L, dk]``, v ``[b, h, L, dv]``, log gates ``[b, h, L]``."""
    memory, normaliser, maximum = state
    length = q.size(2)
    cumulative = torch.cumsum(log_f, dim=-1)  # b_t [b, h, L]
    causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
    log_weights = cumulative[..., :, None] - cumulative[..., None, :] + log_i[..., None, :]  # [b, h, t, j]
    log_weights = torch.where(causal, log_weights, torch.full_like(log_weights, float("-inf")))
    entering = cumulative + maximum[..., None]  # the incoming state's log weight at each t [b, h, L]
    top = torch.maximum(entering, log_weights.amax(dim=-1))  # m_t [b, h, L]
    scores = (q @ k.transpose(-1, -2)) * torch.exp(log_weights - top[..., None])  # [b, h, t, j]
    carried = torch.exp(entering - top)  # [b, h, L]
    numerator = carried[..., None] * (q @ memory) + scores @ v  # [b, h, L, dv]
    denominator = carried * (q @ normaliser[..., None]).squeeze(-1) + scores.sum(-1)  # [b, h, L]
    out = numerator / (torch.maximum(denominator.abs(), torch.exp(-top)) + eps)[..., None]
    last = top[..., -1]  # m after the chunk [b, h]
    written = torch.exp(cumulative[..., -1:] - cumulative + log_i - last[..., None])  # each token's weight [b, h, L]
    keep = torch.exp(cumulative[..., -1] + maximum - last)  # [b, h]
    memory = keep[..., None, None] * memory + (k * written[..., None]).transpose(-1, -2) @ v
    normaliser = keep[..., None] * normaliser + (k * written[..., None]).sum(dim=-2)
    return out, (memory, normaliser, last)


def mlstm_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, igate: torch.Tensor, fgate: torch.Tensor,
                  state: Optional[MLstmState] = None, eps: float = 1e-6, chunk_size: int = 64
                  ) -> Tuple[torch.Tensor, MLstmState]:
    """:func:`mlstm_recurrent` in chunks of ``chunk_size`` tokens (module docstring); same arguments and results."""
    heads_first = lambda t: t.float().transpose(1, 2)  # [b, s, h, ...] -> [b, h, s, ...]
    q32, k32, v32 = heads_first(q) * q.size(-1) ** -0.5, heads_first(k), heads_first(v)
    log_i, log_f = heads_first(igate), F.logsigmoid(heads_first(fgate))  # [b, h, s]
    carry = _zero_state(q, v) if state is None else state
    outputs = []
    for start in range(0, q.size(1), max(chunk_size, 1)):
        piece = slice(start, start + chunk_size)
        out, carry = _chunk(q32[:, :, piece], k32[:, :, piece], v32[:, :, piece], log_i[..., piece],
                            log_f[..., piece], carry, eps)
        outputs.append(out)
    return torch.cat(outputs, dim=2).transpose(1, 2), carry  # [b, s, h, dv]


class MLstm(nn.Module):
    """xLSTM's mLSTM layer (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP). Heads and
    head dims: ``--linear-num-value-heads`` (equal to ``--linear-num-key-heads``), ``--linear-key-head-dim`` (q, k)
    and ``--linear-value-head-dim`` (v, o)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype, hidden = self.group.size, config.params_dtype, config.hidden_size
        heads, dk, dv = config.linear_num_value_heads, config.linear_key_head_dim, config.linear_value_head_dim
        self.local_heads, self.dk, self.dv = heads // tp, dk, dv
        common = dict(group=self.group, sequence_parallel=config.sequence_parallel, dtype=dtype)
        projections = (Segment(heads, dk), Segment(heads, dk), Segment(heads, dv), Segment(heads, dv))
        self.in_proj = ColumnParallelLinear(hidden, heads * (2 * dk + 2 * dv), bias=False, segments=projections,
                                            **common)
        self.in_split = [seg.local_units(tp) * seg.unit_size for seg in projections]
        self.gate_proj = ColumnParallelLinear(hidden, 2 * heads, bias=True, segments=(Segment(heads), Segment(heads)),
                                              init="zeros", **common)
        mark_param(self.gate_proj.bias, init="mlstm_gate_bias", tp_shard=self.gate_proj.shard)
        # the per-head LayerNorm's weight [heads/tp * dv] (transformers' multihead_norm, no bias)
        self.norm_weight = split_vector(TPShard(0, (Segment(heads, dv),)), tp, "ones", dtype)
        self.out_proj = RowParallelLinear(heads * dv, hidden, bias=False, segments=(Segment(heads, dv),), **common)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        q, k, v, o = self.in_proj(hidden).split(self.in_split, dim=-1)  # [s, b, h/tp dk] x2, [s, b, h/tp dv] x2
        gates = soft_cap(self.gate_proj(hidden), self.config.mlstm_gate_soft_cap)  # [s, b, 2 h/tp]: [i; f]
        cell = sequence_scan(self._core, torch.cat([q, k, v, gates], dim=-1).transpose(0, 1), layout)
        normed = self._head_norm(cell.transpose(0, 1))  # [s, b, h/tp * dv]
        return self.out_proj(torch.sigmoid(o) * normed)  # [s, b, h] ([s/tp, b, h] under SP)

    def _head_norm(self, cell: torch.Tensor) -> torch.Tensor:
        """LayerNorm over each head's ``dv`` (fp32, no bias) times the weight; ``[s, b, h/tp * dv]``."""
        seq, batch = cell.shape[:2]
        per_head = cell.float().view(seq, batch, self.local_heads, self.dv)
        normed = F.layer_norm(per_head, (self.dv,), eps=self.config.norm_epsilon).view(seq, batch, -1)
        return normed.to(self.norm_weight.dtype) * self.norm_weight

    def _core(self, inputs: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """The cell over ``inputs`` ``[b, s, h/tp * (2 dk + dv + 2)]`` (q, k, v, capped i, f) ->
        ``[b, s, h/tp * dv]``; carry = ``(C', n', m)``."""
        batch, seq, heads = inputs.size(0), inputs.size(1), self.local_heads
        q, k, v, log_i, f = inputs.split([heads * self.dk, heads * self.dk, heads * self.dv, heads, heads], dim=-1)
        shape = (batch, seq, heads, -1)
        out, state = mlstm_chunked(q.reshape(shape), k.reshape(shape), v.reshape(shape), log_i, f,
                                   carry, self.config.mlstm_eps, self.config.linear_chunk_size)
        return out.reshape(batch, seq, -1).to(inputs.dtype), state
