"""The gated DeltaNet token mixer (Qwen3-Next, Qwen3.5 linear attention) and its delta-rule kernels.

**The delta rule.** Per value head the recurrent state ``S`` is a ``[dk, dv]`` matrix (fp32). Token ``t``
decays it, corrects what it predicts for the token's key and reads it with the query::

    S' = exp(g_t) S_{t-1}                      (g_t <= 0: the decay, in log space)
    S_t = S' + beta_t k_t (v_t - S'^T k_t)^T    (beta_t in (0, 1): how much of the error is written)
    o_t = S_t^T q_t

with ``q`` and ``k`` L2-normalised (eps 1e-6, as flash-linear-attention) and ``q`` scaled by ``dk^-0.5``.
Value heads come in groups: with ``h_v = r * h_k`` value head ``i`` reads key/query head ``i // r``.
Kimi Delta Attention (Kimi Linear) is the same rule with a decay per key channel, ``g_t`` of ``[dk]``
(``S' = diag(exp(g_t)) S``): the ``kimi_delta_rule_*`` functions.

Two pure-PyTorch forms, fp32, each taking and returning the state ``[b, h_v, dk, dv]`` so that a
sequence cut in two with the state passed on gives the whole sequence's result:

* :func:`gated_delta_rule_recurrent`: token by token (the definition);
* :func:`gated_delta_rule_chunked`: chunks of ``chunk_size`` tokens. Within a chunk the writes
  ``u_t = beta_t (v_t - S'^T k_t)`` depend on each other through a unit lower-triangular system
  (the WY / UT transform): ``(I + A) U = beta V - beta exp(G) K S_0`` with
  ``A_ij = beta_i exp(G_i - G_j) k_i . k_j`` (``j < i``, ``G`` the chunk's cumulative decay), solved
  once per chunk; the chunk's outputs are a masked, decayed ``Q K^T`` product over ``U`` plus the
  entering state read by the decayed queries, and the state leaving the chunk is the decayed
  entering state plus ``K^T U`` with each key decayed to the chunk's end. Only ``[chunk, chunk]``
  blocks per chunk are built, so memory grows linearly with the sequence; the last chunk is padded
  with tokens that neither decay nor write.

:func:`gated_delta_rule` and :func:`kimi_delta_rule` are the one dispatch point (DESIGN.md,
principle 7): flash-linear-attention's chunked kernels when ``fla`` imports and the tensors are bf16/fp16
on its device (fla refuses fp32), the chunked reference everywhere else.

**The mixer** (:class:`GatedDeltaNet`, ``[s, b, h]`` in and out, ``[s/tp, b, h]`` under sequence
parallelism): ``in_proj_qkvz`` and ``in_proj_ba`` project the hidden state in transformers' grouped row
order, per key head ``[q, k, v-group, z-group]`` and ``[b-group, a-group]`` (a group is the key head's
``r`` value heads), so a Qwen3-Next tensor loads by a plain copy; ``[q; k; v]`` (every head's ``q``,
then ``k``, then ``v``) runs through a short causal depthwise conv (no bias) and SiLU;
``beta = sigmoid(b)`` (``2 sigmoid(b)`` with ``--linear-allow-neg-eigval``, OLMo-Hybrid),
``g = -exp(A_log) softplus(a + dt_bias)``; the delta rule gives one ``dv`` vector per value head, normalised by a gated RMSNorm over ``dv`` (``weight * rms_norm(o) * silu(z)``,
one weight shared by every head) and mapped back by ``out_proj``. The conv and the delta rule are the
*stateful core* (:mod:`core.transformer.sequence_state`): carry = (the conv's last ``k - 1`` inputs
``[b, k-1, c]``, the state ``[b, h_v, dk, dv]`` fp32), so packed documents restart at each document.

Tensor parallelism splits the key heads (each with its value-head group): both projections by whole
key-head row blocks (one :class:`Segment` each), the conv channels, ``A_log`` and ``dt_bias`` with their
heads, ``out_proj`` by value heads (row-parallel). The norm's weight is replicated and each rank uses
it for its own heads, so its gradient is a partial sum over TP (``grad_partial_over_tp``). Under
sequence parallelism ``in_proj_*`` all-gather the sequence and ``out_proj`` reduce-scatters it; the core
runs along the full sequence on each rank's heads.

Qwen3.5 (and Qwen3.5-MoE) have the same mixer with separate ``in_proj_qkv`` (``[q; k; v]``),
``in_proj_z``, ``in_proj_b`` and ``in_proj_a``: :func:`qkvz_from_separate`, :func:`ba_from_separate` and
their inverses regroup those rows for the converter.
"""
from __future__ import annotations

from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import kernels_by_device
from core.fused import FusedOp, Kernel, decide_kernel, kernel_choice
from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, mark_param
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import carried_causal_conv, split_vector
from core.transformer.norms import RMSNorm
from core.transformer.sequence_state import Carry, sequence_scan

L2_NORM_EPS = 1e-6  # flash-linear-attention's (and transformers') eps of the query/key L2 norm

# (q, k, v, g, beta, chunk_size, initial_state) -> (out, final_state)
DeltaRuleKernel = Callable[..., Tuple[torch.Tensor, torch.Tensor]]


def l2_normalize(x: torch.Tensor, eps: float = L2_NORM_EPS) -> torch.Tensor:
    """``x / sqrt(|x|^2 + eps)`` over the last dim."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


# ---------------------------------------------------------------------------------------------------------
# the reference kernels, on grouped fp32 tensors: q, k [b, hk, 1, s, dk]; v [b, hk, r, s, dv];
# g [b, hk, r, s, 1 | dk] (a decay per head or per key channel); beta [b, hk, r, s]; state [b, hk, r, dk, dv]
# ---------------------------------------------------------------------------------------------------------

def _grouped(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
             use_qk_l2norm: bool) -> Tuple[torch.Tensor, ...]:
    """The kernels' inputs (q, k ``[b, s, hk, dk]``, v ``[b, s, hv, dv]``, g ``[b, s, hv(, dk)]``, beta
    ``[b, s, hv]``) in fp32, heads first and value heads grouped by their key head; q normalised and scaled."""
    batch, seq, key_heads, key_dim = k.shape
    value_heads, value_dim = v.shape[2:]
    if value_heads % key_heads:
        raise ValueError(f"{value_heads} value heads are not a multiple of {key_heads} key heads")
    ratio = value_heads // key_heads
    q, k = (x.float().transpose(1, 2).unsqueeze(2) for x in (q, k))  # [b, hk, 1, s, dk]
    if use_qk_l2norm:
        q, k = l2_normalize(q), l2_normalize(k)
    q = q * key_dim ** -0.5
    v = v.float().transpose(1, 2).reshape(batch, key_heads, ratio, seq, value_dim)
    g = (g if g.dim() == 4 else g.unsqueeze(-1)).float().transpose(1, 2)  # [b, hv, s, 1 | dk]
    g = g.reshape(batch, key_heads, ratio, seq, g.size(-1))
    beta = beta.float().transpose(1, 2).reshape(batch, key_heads, ratio, seq)
    return q, k, v, g, beta


def _grouped_state(initial_state: Optional[torch.Tensor], v: torch.Tensor, key_dim: int) -> torch.Tensor:
    """The entering state ``[b, hv, dk, dv]`` (None: zeros) as ``[b, hk, r, dk, dv]`` fp32."""
    batch, key_heads, ratio, _, value_dim = v.shape
    if initial_state is None:
        return v.new_zeros(batch, key_heads, ratio, key_dim, value_dim)
    return initial_state.float().reshape(batch, key_heads, ratio, key_dim, value_dim)


def _ungrouped(out: torch.Tensor, state: torch.Tensor, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """out ``[b, hk, r, s, dv]`` -> ``[b, s, hv, dv]`` in ``dtype``; state -> ``[b, hv, dk, dv]`` fp32."""
    batch, key_heads, ratio, seq, value_dim = out.shape
    out = out.reshape(batch, key_heads * ratio, seq, value_dim).transpose(1, 2).contiguous().to(dtype)
    return out, state.reshape(batch, key_heads * ratio, *state.shape[-2:])


def _recurrence(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                state: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The delta rule token by token on grouped tensors; returns out ``[b, hk, r, s, dv]`` and the state."""
    outputs = []
    for t in range(q.size(-2)):
        state = state * torch.exp(g[..., t, :]).unsqueeze(-1)  # decay: [b, hk, r, dk, dv]
        key = k[..., t, :]  # [b, hk, 1, dk]
        predicted = (key.unsqueeze(-2) @ state).squeeze(-2)  # [b, hk, r, dv]
        write = beta[..., t, None] * (v[..., t, :] - predicted)  # [b, hk, r, dv]
        state = state + key.unsqueeze(-1) * write.unsqueeze(-2)
        outputs.append((q[..., t, :].unsqueeze(-2) @ state).squeeze(-2))  # [b, hk, r, dv]
    return torch.stack(outputs, dim=-2), state


def _decayed_products(x: torch.Tensor, y: torch.Tensor, cum_decay: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = sum_d x_id y_jd exp(G_id - G_jd)`` where ``mask[i, j]``, else 0.

    x, y ``[..., C, dk]``; cum_decay ``G`` ``[..., C, 1 | dk]`` (a decay per head or per key channel);
    mask ``[C, C]`` (lower-triangular: ``G_i - G_j <= 0``, masked before the exp so nothing overflows).
    """
    if cum_decay.size(-1) == 1:  # one decay per head: a scaled product
        diff = cum_decay[..., :, None, 0] - cum_decay[..., None, :, 0]  # [..., C, C]
        return (x @ y.transpose(-1, -2)) * torch.exp(diff.masked_fill(~mask, float("-inf")))
    diff = cum_decay[..., :, None, :] - cum_decay[..., None, :, :]  # [..., C, C, dk]
    decay = torch.exp(diff.masked_fill(~mask[..., None], float("-inf")))
    return torch.einsum("...id,...jd,...ijd->...ij", x, y, decay)


def _pad_chunks(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """``[..., s, d]`` zero-padded along s to a multiple of ``chunk`` -> ``[..., n, chunk, d]``."""
    pad = (-x.size(-2)) % chunk
    x = F.pad(x, (0, 0, 0, pad))
    return x.reshape(*x.shape[:-2], -1, chunk, x.size(-1))


def _chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
             state: torch.Tensor, chunk: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The delta rule in chunks on grouped tensors (module docstring); out ``[b, hk, r, s, dv]``, state."""
    seq, value_dim = v.shape[-2:]
    chunk = max(min(chunk, seq), 1)  # a shorter sequence (a CP run, a document) is one chunk of its own length
    # padded tokens: g = 0 (no decay), beta = 0 (no write), k = q = 0
    q, k, v, g, beta = (_pad_chunks(x, chunk) for x in (q, k, v, g, beta.unsqueeze(-1)))  # [.., n, C, d]
    beta = beta.squeeze(-1)  # [b, hk, r, n, C]
    cum_decay = g.cumsum(dim=-2)  # [b, hk, r, n, C, 1 | dk]
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    strictly_lower = lower.tril(-1)
    # (I + A) [U0 | W] = [beta V | beta exp(G) K]: then the writes are U = U0 - W S_0
    system = beta.unsqueeze(-1) * _decayed_products(k, k, cum_decay, strictly_lower)  # [b, hk, r, n, C, C]
    system = system + torch.eye(chunk, dtype=system.dtype, device=system.device)
    decayed_k = torch.exp(cum_decay) * k  # [b, hk, r, n, C, dk]
    rhs = beta.unsqueeze(-1) * torch.cat([v, decayed_k], dim=-1)  # [b, hk, r, n, C, dv + dk]
    writes, reads = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True).split(
        [value_dim, k.size(-1)], dim=-1)  # U0 [.., C, dv], W [.., C, dk]
    scores = _decayed_products(q, k, cum_decay, lower)  # [b, hk, r, n, C, C]
    decayed_q = q * torch.exp(cum_decay)  # [b, hk, r, n, C, dk]: reads the entering state
    k_to_end = k * torch.exp(cum_decay[..., -1:, :] - cum_decay)  # [b, hk, r, n, C, dk]
    chunk_decay = torch.exp(cum_decay[..., -1, :]).unsqueeze(-1)  # [b, hk, r, n, 1 | dk, 1]
    outputs = []
    for i in range(q.size(3)):
        write = writes[:, :, :, i] - reads[:, :, :, i] @ state  # [b, hk, r, C, dv]
        outputs.append(decayed_q[:, :, :, i] @ state + scores[:, :, :, i] @ write)
        state = state * chunk_decay[:, :, :, i] + k_to_end[:, :, :, i].transpose(-1, -2) @ write
    out = torch.stack(outputs, dim=3).flatten(3, 4)[..., :seq, :]  # [b, hk, r, s, dv]
    return out, state


def gated_delta_rule_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                               beta: torch.Tensor, initial_state: Optional[torch.Tensor] = None,
                               use_qk_l2norm: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule token by token, fp32.

    q, k ``[b, s, hk, dk]``; v ``[b, s, hv, dv]`` (hv a multiple of hk); g (log decay, <= 0), beta
    ``[b, s, hv]``; initial_state ``[b, hv, dk, dv]`` or None (zeros). Returns out ``[b, s, hv, dv]`` (in
    q's dtype) and the final state ``[b, hv, dk, dv]`` fp32.
    """
    q32, k32, v32, g32, beta32 = _grouped(q, k, v, g, beta, use_qk_l2norm)
    out, state = _recurrence(q32, k32, v32, g32, beta32, _grouped_state(initial_state, v32, k.size(-1)))
    return _ungrouped(out, state, q.dtype)


def gated_delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                             beta: torch.Tensor, chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None,
                             use_qk_l2norm: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule in chunks of ``chunk_size`` tokens (any size; the last chunk padded), fp32.

    Same arguments and results as :func:`gated_delta_rule_recurrent`; memory linear in the sequence.
    """
    q32, k32, v32, g32, beta32 = _grouped(q, k, v, g, beta, use_qk_l2norm)
    out, state = _chunked(q32, k32, v32, g32, beta32, _grouped_state(initial_state, v32, k.size(-1)), chunk_size)
    return _ungrouped(out, state, q.dtype)


def kimi_delta_rule_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                              beta: torch.Tensor, initial_state: Optional[torch.Tensor] = None,
                              use_qk_l2norm: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Kimi Delta Attention token by token: :func:`gated_delta_rule_recurrent` with a decay per key channel,
    g ``[b, s, hv, dk]``."""
    if g.dim() != 4:
        raise ValueError(f"Kimi Delta Attention decays per key channel: g [b, s, h, dk], got {tuple(g.shape)}")
    return gated_delta_rule_recurrent(q, k, v, g, beta, initial_state, use_qk_l2norm)


def kimi_delta_rule_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                            beta: torch.Tensor, chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None,
                            use_qk_l2norm: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
    """Kimi Delta Attention in chunks: :func:`gated_delta_rule_chunked` with g ``[b, s, hv, dk]`` (the
    pairwise decays are ``[chunk, chunk, dk]`` blocks per chunk, still linear in the sequence)."""
    if g.dim() != 4:
        raise ValueError(f"Kimi Delta Attention decays per key channel: g [b, s, h, dk], got {tuple(g.shape)}")
    return gated_delta_rule_chunked(q, k, v, g, beta, chunk_size, initial_state, use_qk_l2norm)


# ---------------------------------------------------------------------------------------------------------
# the one dispatch point: flash-linear-attention's kernels where installed, the chunked reference elsewhere
# ---------------------------------------------------------------------------------------------------------

def _fla_adapter(fla_function: Callable[..., Tuple[torch.Tensor, torch.Tensor]],
                 reference: DeltaRuleKernel) -> DeltaRuleKernel:
    """Our kernel signature over an fla chunk kernel (its own chunk size; key heads repeated per value head).

    fla's chunk kernels refuse fp32 inputs: fp32 runs (the exact path) take ``reference``; bf16/fp16 run in
    fla with beta in the inputs' dtype and the log decay and the state in fp32, as transformers calls it.
    """
    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
               chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None,
               use_qk_l2norm: bool = True) -> Tuple[torch.Tensor, torch.Tensor]:
        if q.dtype == torch.float32:
            return reference(q, k, v, g, beta, chunk_size, initial_state, use_qk_l2norm)
        ratio = v.size(2) // k.size(2)
        if ratio > 1:
            q, k = q.repeat_interleave(ratio, dim=2), k.repeat_interleave(ratio, dim=2)  # [b, s, hv, dk]
        out, state = fla_function(q, k, v, g=g.float(), beta=beta.to(q.dtype),
                                  initial_state=None if initial_state is None else initial_state.float(),
                                  output_final_state=True, use_qk_l2norm_in_kernel=use_qk_l2norm)
        return out, state.float()
    return kernel


def _fla_gated_delta_rule() -> Optional[Kernel]:
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    except ImportError:  # flash-linear-attention is optional
        return None
    return _fla_adapter(chunk_gated_delta_rule, gated_delta_rule_chunked)


def _fla_kimi_delta_rule() -> Optional[Kernel]:
    try:
        from fla.ops.kda import chunk_kda
    except ImportError:
        return None
    return _fla_adapter(chunk_kda, kimi_delta_rule_chunked)


# the package kernel whenever it imports (no flag asks for it), else the reference; never torch.compile'd
GATED_DELTA_RULE = FusedOp("gated_delta_rule", "flash-linear-attention", gated_delta_rule_chunked,
                           kernels_by_device(fla=("fla", _fla_gated_delta_rule)), reference_name="chunked",
                           compilable=False, kernels_by_default=True)
KIMI_DELTA_RULE = FusedOp("kimi_delta_rule", "flash-linear-attention", kimi_delta_rule_chunked,
                          kernels_by_device(fla=("fla", _fla_kimi_delta_rule)), reference_name="chunked",
                          compilable=False, kernels_by_default=True)


@kernel_choice
def gated_delta_rule_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """The gated delta rule for tensors on ``device_type``: ("fla" | "chunked", function)."""
    return decide_kernel(GATED_DELTA_RULE, device_type, fused)


@kernel_choice
def kimi_delta_rule_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """Kimi Delta Attention for tensors on ``device_type``: ("fla" | "chunked", function)."""
    return decide_kernel(KIMI_DELTA_RULE, device_type, fused)


def gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                     chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None
                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule (arguments of :func:`gated_delta_rule_chunked`) by the chosen kernel."""
    return gated_delta_rule_kernel(q.device.type)[1](q, k, v, g, beta, chunk_size, initial_state)


def kimi_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                    chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None
                    ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Kimi Delta Attention (arguments of :func:`kimi_delta_rule_chunked`) by the chosen kernel."""
    return kimi_delta_rule_kernel(q.device.type)[1](q, k, v, g, beta, chunk_size, initial_state)


# ---------------------------------------------------------------------------------------------------------
# the mixer
# ---------------------------------------------------------------------------------------------------------

class GatedDeltaNet(nn.Module):
    """Qwen3-Next's gated DeltaNet mixer (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP).

    Parameter names are transformers' (``in_proj_qkvz``, ``in_proj_ba``, ``conv1d``, ``dt_bias``,
    ``A_log``, ``norm``, ``out_proj``), with the same row order, so a Qwen3-Next checkpoint converts by copying
    (Qwen3.5's separate projections by the row permutations :func:`qkvz_from_separate` / :func:`ba_from_separate`).
    """

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype = self.group.size, config.params_dtype
        key_heads, value_heads = config.linear_num_key_heads, config.linear_num_value_heads
        key_dim, value_dim = config.linear_key_head_dim, config.linear_value_head_dim
        ratio = value_heads // key_heads
        self.local_key_heads, self.local_value_heads = key_heads // tp, value_heads // tp
        self.key_dim, self.value_dim, self.ratio = key_dim, value_dim, ratio
        self.chunk_size = config.linear_chunk_size
        qkvz = Segment(key_heads, 2 * key_dim + 2 * ratio * value_dim)  # per key head [q, k, v-group, z-group]
        ba = Segment(key_heads, 2 * ratio)  # per key head [b-group, a-group]
        common = dict(group=self.group, bias=config.add_bias_linear, sequence_parallel=config.sequence_parallel,
                      dtype=dtype)
        self.in_proj_qkvz = ColumnParallelLinear(config.hidden_size, qkvz.size, segments=(qkvz,), **common)
        self.in_proj_ba = ColumnParallelLinear(config.hidden_size, ba.size, segments=(ba,), **common)
        conv_shard = TPShard(0, (Segment(key_heads, key_dim), Segment(key_heads, key_dim),
                                 Segment(value_heads, value_dim)))  # [q; k; v]
        self.conv_channels = conv_shard.local_size(tp)
        self.conv1d = nn.Conv1d(self.conv_channels, self.conv_channels, config.linear_conv_kernel_dim,
                                groups=self.conv_channels, bias=False, dtype=dtype)
        mark_param(self.conv1d.weight, init="normal", tp_shard=conv_shard)
        # Megatron's (Mamba's) initialisation: dt log-uniform in [1e-3, 1e-1] as softplus^-1, A uniform in [1, 16]
        per_head = TPShard.even(0, value_heads)  # split with their heads
        self.dt_bias = split_vector(per_head, tp, "mamba_dt_bias", dtype)  # [hv/tp]
        self.A_log = split_vector(per_head, tp, "mamba_a_log_uniform", dtype)  # [hv/tp]
        # one weight over dv for every head (plain weight, no 1+w offset), used by each rank for its own heads
        eps = config.linear_norm_epsilon if config.linear_norm_epsilon is not None else config.norm_epsilon
        self.norm = RMSNorm(value_dim, eps, grad_partial_over_tp=True, dtype=dtype, fused=config.use_fused_rmsnorm)
        self.beta_scale = 2.0 if config.linear_allow_neg_eigval else 1.0  # OLMo-Hybrid: beta in (0, 2)
        self.out_proj = RowParallelLinear(value_heads * value_dim, config.hidden_size, group=self.group,
                                          bias=config.add_bias_linear, sequence_parallel=config.sequence_parallel,
                                          segments=(Segment(value_heads, value_dim),), dtype=dtype)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        qkvz, ba = self.in_proj_qkvz(hidden), self.in_proj_ba(hidden)  # [s, b, local rows] over the full sequence
        seq, batch = qkvz.shape[:2]
        heads, group_width = self.local_key_heads, self.ratio * self.value_dim
        q, k, v, z = qkvz.view(seq, batch, heads, -1).split([self.key_dim, self.key_dim, group_width,
                                                             group_width], dim=-1)
        beta_logits, a = ba.view(seq, batch, heads, -1).split([self.ratio, self.ratio], dim=-1)
        core_in = torch.cat([x.reshape(seq, batch, -1) for x in (q, k, v, beta_logits, a)], dim=-1)
        core_out = sequence_scan(self._core, core_in.transpose(0, 1), layout)  # [b, s, hv/tp * dv]
        out = core_out.transpose(0, 1).reshape(seq, batch, self.local_value_heads, self.value_dim)
        gate = z.reshape(seq, batch, self.local_value_heads, self.value_dim)
        gated = self.norm(out) * F.silu(gate.float())  # [s, b, hv/tp, dv]
        return self.out_proj(gated.to(qkvz.dtype).reshape(seq, batch, -1))  # [s, b, h] ([s/tp, b, h] SP)

    def _core(self, inputs: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """conv + SiLU, q/k/v split, beta and g, the delta rule: inputs ``[b, s, c + 2 hv/tp]`` ->
        ``[b, s, hv/tp * dv]``; carry = (conv inputs ``[b, k-1, c]``, state ``[b, hv/tp, dk, dv]`` fp32)."""
        batch, seq = inputs.shape[:2]
        heads = self.local_value_heads
        mixed, beta_logits, a = inputs.split([self.conv_channels, heads, heads], dim=-1)
        conv_past, state = carry if carry is not None else (None, None)
        mixed, conv_past = carried_causal_conv(mixed, self.conv1d.weight, None, conv_past, silu=True)
        key_width = self.local_key_heads * self.key_dim
        q, k, v = mixed.split([key_width, key_width, heads * self.value_dim], dim=-1)
        beta = torch.sigmoid(beta_logits.float()) * self.beta_scale  # [b, s, hv/tp]
        g = -torch.exp(self.A_log.float()) * F.softplus(a.float() + self.dt_bias.float())  # [b, s, hv/tp]
        out, state = gated_delta_rule(q.reshape(batch, seq, -1, self.key_dim), k.reshape(batch, seq, -1, self.key_dim),
                                      v.reshape(batch, seq, heads, self.value_dim), g, beta, self.chunk_size, state)
        return out.reshape(batch, seq, -1), (conv_past, state)


# ---------------------------------------------------------------------------------------------------------
# checkpoint layouts: Qwen3.5 projects [q; k; v], z, b and a separately, every head's rows in turn; ours
# (Qwen3-Next's) groups them per key head. Row permutations of dim 0, for the converter's transforms; with
# ``tp``, of the rows one of ``tp`` TP ranks holds (its heads: Megatron-core's in_proj is, per rank, the
# separate layout of that rank's heads).
# ---------------------------------------------------------------------------------------------------------

def _head_sizes(config: TransformerConfig, tp: int = 1) -> Tuple[int, int, int, int]:
    """(key heads of one of ``tp`` ranks, key dim, value heads per key head, value dim)."""
    key_heads = config.linear_num_key_heads
    return (key_heads // tp, config.linear_key_head_dim, config.linear_num_value_heads // key_heads,
            config.linear_value_head_dim)


def qkvz_from_separate(qkv: torch.Tensor, z: torch.Tensor, config: TransformerConfig, tp: int = 1) -> torch.Tensor:
    """``in_proj_qkvz`` rows (per key head ``[q, k, v-group, z-group]``) from Qwen3.5's ``in_proj_qkv``
    (``[q; k; v]``) and ``in_proj_z`` rows; any trailing dims (a weight's input columns) ride along."""
    heads, key_dim, ratio, value_dim = _head_sizes(config, tp)
    rest = qkv.shape[1:]
    q, k, v = qkv.split([heads * key_dim, heads * key_dim, heads * ratio * value_dim], dim=0)
    grouped = [q.reshape(heads, key_dim, *rest), k.reshape(heads, key_dim, *rest),
               v.reshape(heads, ratio * value_dim, *rest), z.reshape(heads, ratio * value_dim, *rest)]
    return torch.cat(grouped, dim=1).reshape(-1, *rest)


def separate_from_qkvz(qkvz: torch.Tensor, config: TransformerConfig, tp: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """Qwen3.5's ``(in_proj_qkv, in_proj_z)`` rows from ``in_proj_qkvz``'s (the inverse of
    :func:`qkvz_from_separate`)."""
    heads, key_dim, ratio, value_dim = _head_sizes(config, tp)
    rest = qkvz.shape[1:]
    q, k, v, z = qkvz.reshape(heads, -1, *rest).split([key_dim, key_dim, ratio * value_dim, ratio * value_dim],
                                                      dim=1)
    return torch.cat([x.reshape(-1, *rest) for x in (q, k, v)], dim=0), z.reshape(-1, *rest)


def ba_from_separate(b: torch.Tensor, a: torch.Tensor, config: TransformerConfig, tp: int = 1) -> torch.Tensor:
    """``in_proj_ba`` rows (per key head ``[b-group, a-group]``) from Qwen3.5's ``in_proj_b`` and ``in_proj_a``."""
    heads, _, ratio, _ = _head_sizes(config, tp)
    rest = b.shape[1:]
    return torch.cat([b.reshape(heads, ratio, *rest), a.reshape(heads, ratio, *rest)], dim=1).reshape(-1, *rest)


def separate_from_ba(ba: torch.Tensor, config: TransformerConfig, tp: int = 1) -> Tuple[torch.Tensor, torch.Tensor]:
    """Qwen3.5's ``(in_proj_b, in_proj_a)`` rows from ``in_proj_ba``'s."""
    heads, _, ratio, _ = _head_sizes(config, tp)
    rest = ba.shape[1:]
    b, a = ba.reshape(heads, 2 * ratio, *rest).split([ratio, ratio], dim=1)
    return b.reshape(-1, *rest), a.reshape(-1, *rest)
