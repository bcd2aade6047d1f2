"""The Mamba mixer of Megatron's hybrid/Mamba models, with its channels split over TP.

Two versions, chosen by ``--mamba-version`` (``TransformerConfig.mamba_version``):

* **Mamba (1)**: ``in_proj`` gives ``[x; z]`` over ``d_inner = expand x hidden``
  channels; ``x`` runs through a causal depthwise conv and SiLU; ``x_proj`` makes
  the input-dependent ``dt`` (low rank), ``B`` and ``C``; ``dt_proj`` lifts ``dt``
  to the channels; the selective scan runs per channel with a state of ``N``
  (``--mamba-state-dim``); the output is gated by ``silu(z)`` and ``out_proj``
  maps it back. FalconMamba adds weightless RMS norms on ``dt``, ``B`` and ``C``
  (``--mamba-mixer-rms-eps``). With ``--mamba-num-heads H`` (Zamba) the ``d_inner = H x
  --mamba-head-dim`` channels are H independent SSMs: each head has its own block of
  ``x_proj`` (``[H (r+2n), p]``) and ``dt_proj`` and so its own dt, B and C.
* **Mamba2 (2)**: ``in_proj`` gives ``[z; x; B; C; dt]`` with ``x`` in heads of
  ``--mamba-head-dim`` channels, ``B``/``C`` in ``--mamba-num-groups`` groups of
  ``N`` and one ``dt`` per head; ``[x; B; C]`` runs through the conv and SiLU; the
  scan is the chunked SSD form (``--mamba-chunk-size``); a gated RMS norm, per
  group of channels, ``norm(y * silu(z))``, precedes ``out_proj``.

Tensor parallelism splits the inner channels: ``in_proj`` is column-parallel
with one :class:`Segment` per fused piece (Mamba2: heads for ``z``, ``x`` and
``dt``, groups for ``B`` and ``C``; groups fewer than TP are replicated, as GQA's
key/value heads), the conv weights, ``A_log``, ``D``, ``dt_bias``/``dt_proj`` and
the gated norm's weight follow their channels, and ``out_proj`` is
row-parallel. Mamba1's ``x_proj`` reads all ``d_inner`` channels: each rank
multiplies its own channels and the partial products are summed over TP in the
forward and the backward (:func:`sum_partials_over_tensor_model_parallel_region`),
so every rank holds the full ``dt``/``B``/``C`` and its gradient sums every
rank's use of them; with heads, TP splits whole heads and ``x_proj`` is local.
Mamba2's gated norm is local when each rank holds whole groups; with fewer
groups than TP a group's sum of squares is summed over the ranks that share it.
Under sequence parallelism the layer input is ``[s/tp, b, h]``: ``in_proj``
all-gathers the sequence and ``out_proj`` reduce-scatters it, as attention
does; the conv and the scan run along the full sequence on each rank's channels.

The scans are pure-PyTorch references in fp32 that follow the math of
``transformers``' non-kernel paths (Mamba: the sequential recurrence; Mamba2:
the chunked SSD), so converted models give the same logits. Where mamba_ssm and
causal-conv1d import (CUDA), their kernels run the scans and the conv behind one
dispatch each (:data:`SSD_SCAN`, :data:`SELECTIVE_SCAN`, :data:`CAUSAL_CONV`),
for the calls they can serve.

What runs along the sequence (the conv, dt/B/C, the scan) is the mixer's stateful
core (``_mamba1_core`` / ``_mamba2_core``, the contract of
``core/transformer/sequence_state.py``): it continues from a carry of the conv's
last ``d_conv - 1`` inputs ``[b, d_conv-1, c/tp]`` and the fp32 SSM state (Mamba
``[b, d/tp, n]``, Mamba2 ``[b, h/tp, p, n]``) and returns the new one; the
projections, the gate and the gated norm stay outside. ``forward`` hands the core
to ``sequence_scan``, which restarts it at packed documents and passes the carry
between context-parallel ranks.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import kernels_by_device
from core.fused import FusedOp, Kernel, decide_kernel, kernel_choice
from core.parallel_state import Group, ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, linear, mark_param
from core.tensor_parallel.mappings import sum_partials_over_tensor_model_parallel_region
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.norms import RMSNorm
from core.transformer.sequence_state import Carry, StatefulCore, carries_across_ranks, sequence_scan


# Megatron's / Mamba's initialisation of the SSM parameters: dt drawn log-uniformly in [DT_MIN, DT_MAX]
# (floored at DT_FLOOR) and stored as softplus^-1(dt); Mamba2's A drawn uniformly in A_INIT_RANGE per head;
# Mamba1's A = 1..N for every channel (the S4D-real initialisation).
DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4
A_INIT_RANGE = (1.0, 16.0)


def _init_dt_bias(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    dt = torch.exp(torch.rand(shape, generator=generator) * (math.log(DT_MAX) - math.log(DT_MIN))
                   + math.log(DT_MIN)).clamp(min=DT_FLOOR)
    return dt + torch.log(-torch.expm1(-dt))  # softplus^-1(dt)


def _init_a_log_uniform(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    low, high = A_INIT_RANGE
    return torch.log(torch.empty(shape).uniform_(low, high, generator=generator))


def _init_a_log_arange(shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    return torch.log(torch.arange(1, shape[-1] + 1, dtype=torch.float32)).expand(*shape).clone()  # [d, n]


# ParamMeta.init_method -> full initial tensor from (full shape, the parameter's generator); read by
# core.models.gpt_model.full_initial_value, so the values do not depend on the TP degree
MAMBA_INITS: Dict[str, Callable[[Sequence[int], torch.Generator], torch.Tensor]] = {
    "mamba_dt_bias": _init_dt_bias,
    "mamba_a_log_uniform": _init_a_log_uniform,
    "mamba_a_log_arange": _init_a_log_arange,
}


def carried_causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                        previous: Optional[torch.Tensor] = None,
                        silu: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each channel convolved with its own kernel over past positions only, continuing from ``previous``
    (then SiLU when ``silu``), through causal-conv1d's kernel where it serves the call (:data:`CAUSAL_CONV`).

    x ``[b, s, c]``; weight ``[c, 1, k]``; previous ``[b, k - 1, c]``, the inputs just before ``x`` (None: zeros,
    a sequence start). Returns the output ``[b, s, c]`` and the last ``k - 1`` inputs ``[b, k - 1, c]`` (older
    carried ones where ``s < k - 1``), the ``previous`` of the tokens that follow.
    """
    return causal_conv_kernel(x.device.type)[1](x, weight, bias, previous, silu)


def reference_causal_conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                          previous: Optional[torch.Tensor], silu: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`carried_causal_conv` in PyTorch: one ``conv1d`` over ``[previous; x]``."""
    history = weight.size(-1) - 1
    if previous is None:
        previous = x.new_zeros(x.size(0), history, x.size(2))
    full = torch.cat([previous.to(x.dtype), x], dim=1)  # [b, k-1+s, c]
    out = F.conv1d(full.transpose(1, 2), weight, bias, groups=x.size(-1)).transpose(1, 2)  # [b, s, c]
    return (F.silu(out) if silu else out), full[:, full.size(1) - history:]


def causal_conv_core(weight: torch.Tensor, bias: Optional[torch.Tensor]) -> StatefulCore:
    """The causal depthwise conv as a stateful core (``core/transformer/sequence_state.py``): inputs ``[b, s, c]``,
    carry ``(the last k - 1 inputs [b, k - 1, c],)``; a short-convolution mixer passes it to ``sequence_scan``."""

    def core(x: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        out, last_inputs = carried_causal_conv(x, weight, bias, None if carry is None else carry[0])
        return out, (last_inputs,)

    return core


def causal_depthwise_conv(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> torch.Tensor:
    """Each channel convolved with its own kernel over past positions only; x ``[b, s, c]``, weight ``[c, 1, k]``."""
    return carried_causal_conv(x, weight, bias)[0]  # [b, s, c]


def weightless_rms_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / rms(x)`` over the last dim in fp32 (FalconMamba's dt/B/C norms)."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def selective_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor, initial_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mamba's recurrence, sequentially in fp32: ``h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t``,
    ``y_t = C_t h_t + D x_t``, from ``h_0 = initial_state`` (None: zeros).

    x, dt ``[b, s, d]`` (dt after softplus); A ``[d, n]``; B, C ``[b, s, n]``, or ``[b, s, h, n]`` for ``h``
    independent SSMs of ``d / h`` channels each (Zamba's heads); D ``[d]``; initial_state ``[b, d, n]``.
    Returns ``y`` ``[b, s, d]`` and the final state ``[b, d, n]`` (fp32).
    """
    x, dt, B, C = x.float(), dt.float(), B.float(), C.float()
    batch, seq, channels = x.shape
    if B.dim() == 3:  # one SSM: every channel reads the same B and C
        B, C = B[:, :, None], C[:, :, None]  # [b, s, 1, n]
    heads = B.size(2)
    if initial_state is None:
        state = x.new_zeros(batch, channels, A.size(1))  # [b, d, n]
    else:
        state = initial_state.float()
    state = state.view(batch, heads, channels // heads, -1)  # [b, h, d/h, n]
    decay_rate = A.view(heads, channels // heads, -1)  # [h, d/h, n]
    x_heads, dt_heads = (t.view(batch, seq, heads, channels // heads) for t in (x, dt))  # [b, s, h, d/h]
    outputs = []
    for t in range(seq):
        step_dt = dt_heads[:, t, :, :, None]  # [b, h, d/h, 1]
        state = torch.exp(decay_rate * step_dt) * state + (step_dt * B[:, t, :, None, :]) * x_heads[:, t, :, :, None]
        outputs.append(torch.matmul(state, C[:, t, :, :, None])[..., 0].reshape(batch, channels))  # [b, d]
    return torch.stack(outputs, dim=1) + x * D.float(), state.reshape(batch, channels, -1)  # [b, s, d], [b, d, n]


def segment_sums(a: torch.Tensor) -> torch.Tensor:
    """``out[..., i, j] = a[..., j+1] + ... + a[..., i]`` for ``i >= j`` (0 on the diagonal), ``-inf`` above it.

    a ``[..., T]`` -> ``[..., T, T]``; summed with a masked cumsum, not a difference of cumsums, for stability.
    """
    length = a.size(-1)
    rows = a[..., :, None].expand(*a.shape, length)  # [..., T(k), T(j)] = a[k]
    strictly_lower = torch.tril(torch.ones(length, length, dtype=torch.bool, device=a.device), diagonal=-1)
    sums = torch.cumsum(rows.masked_fill(~strictly_lower, 0.0), dim=-2)  # [..., i, j] = sum_{j < k <= i} a[k]
    lower = torch.tril(torch.ones(length, length, dtype=torch.bool, device=a.device))
    return sums.masked_fill(~lower, float("-inf"))


def _chunks(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """``[b, s, ...]`` zero-padded to a multiple of ``chunk`` and split: ``[b, c, chunk, ...]``."""
    pad = (-x.size(1)) % chunk
    if pad:
        x = torch.cat([x, x.new_zeros((x.size(0), pad) + tuple(x.shape[2:]))], dim=1)
    return x.reshape(x.size(0), -1, chunk, *x.shape[2:])


def ssd_chunked_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                     D: torch.Tensor, chunk: int,
                     initial_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Mamba2's state-space dual (SSD) scan in chunks, fp32, from ``initial_state`` (None: zeros).

    x ``[b, s, h, p]``; dt ``[b, s, h]`` (after softplus and clamp); A, D ``[h]``; B, C ``[b, s, h, n]``
    (already one per head); initial_state ``[b, h, p, n]``. Within a chunk the output is a masked, decayed
    ``C B^T`` product; states are carried between chunks by their cumulative decay. Returns ``y``
    ``[b, s, h, p]`` and the state after the last token ``[b, h, p, n]`` (the zero padding of a last partial
    chunk neither decays nor adds to it). A sequence shorter than ``chunk`` (a CP run, a packed document) is one
    chunk of its own length: the result does not depend on the chunk, padding it would only cost memory.
    """
    seq = x.size(1)
    chunk = max(min(chunk, seq), 1)
    x, dt, B, C = x.float(), dt.float(), B.float(), C.float()
    x_dt = x * dt[..., None]  # [b, s, h, p]
    a_dt = A.float() * dt  # [b, s, h]
    x_dt, a_dt, B, C = (_chunks(t, chunk) for t in (x_dt, a_dt, B, C))  # [b, c, l, ...]
    a_dt = a_dt.permute(0, 3, 1, 2)  # [b, h, c, l]
    a_cum = torch.cumsum(a_dt, dim=-1)  # [b, h, c, l]
    # 1. within each chunk: y_l = sum_{s <= l} (C_l . B_s) exp(a_{s+1} + ... + a_l) x_s dt_s
    decay_within = torch.exp(segment_sums(a_dt))  # [b, h, c, l, s]
    scores = torch.einsum("bclhn,bcshn->bhcls", C, B) * decay_within  # [b, h, c, l, s]
    y_diag = torch.einsum("bhcls,bcshp->bclhp", scores, x_dt)  # [b, c, l, h, p]
    # 2. each chunk's final state from its own inputs
    decay_to_end = torch.exp(a_cum[..., -1:] - a_cum)  # [b, h, c, l]
    chunk_states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_to_end, x_dt)  # [b, c, h, p, n]
    # 3. the state entering each chunk (and leaving the last): the initial and earlier chunks' states decayed
    # across the chunks between
    first = torch.zeros_like(chunk_states[:, :1]) if initial_state is None else initial_state.float()[:, None]
    chunk_states = torch.cat([first, chunk_states], dim=1)  # [b, c+1, h, p, n]
    decay_chunks = torch.exp(segment_sums(F.pad(a_cum[..., -1], (1, 0))))  # [b, h, c+1, c+1]
    states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunks, chunk_states)  # [b, c+1, h, p, n]
    entering, final_state = states[:, :-1], states[:, -1]  # [b, c, h, p, n], [b, h, p, n]
    # 4. the entering state's contribution inside each chunk
    y_off = torch.einsum("bclhn,bchpn,bhcl->bclhp", C, entering, torch.exp(a_cum))  # [b, c, l, h, p]
    y = (y_diag + y_off).reshape(x.size(0), -1, *x.shape[2:])[:, :seq]  # [b, s, h, p]
    return y + x * D.float()[:, None], final_state


# --------------------------------------------------------------------------- fast kernels
# causal-conv1d's conv and mamba_ssm's scans whenever they import (CUDA; no flag asks for them, as for fla's
# delta rules), each behind one FusedOp of DESIGN.md principle 7; the references above everywhere else and for
# the calls a kernel cannot serve (said at each adapter). A kernel gives the reference's numbers up to the
# order of its fp32 accumulation; the conv runs in the inputs' dtype as the reference does, the scans return
# fp32 outputs and states as the references do.

CONV_KERNEL_WIDTHS = (2, 3, 4)  # the widths causal-conv1d's kernel compiles
CHANNEL_LAST_ALIGN = 8  # its channel-last layout (the only one that takes and returns states) needs c % 8 == 0


def _causal_conv1d_adapter(function: Kernel, reference: Kernel) -> Kernel:
    """:func:`carried_causal_conv`'s signature over ``causal_conv1d_fn`` (x ``[b, c, s]`` channel-last, weight
    ``[c, k]``, states ``[b, c, k - 1]`` channel-last, in x's dtype); other widths, channel counts and a bias
    whose dtype differs from the weight's take ``reference``."""
    def kernel(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], previous: Optional[torch.Tensor],
               silu: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        channels, width = weight.size(0), weight.size(-1)
        if (width not in CONV_KERNEL_WIDTHS or channels % CHANNEL_LAST_ALIGN
                or (bias is not None and bias.dtype != weight.dtype)):
            return reference(x, weight, bias, previous, silu)
        x_last = x.contiguous().transpose(1, 2)  # [b, c, s], channels contiguous
        initial = None if previous is None else previous.to(x.dtype).contiguous().transpose(1, 2)  # [b, c, k-1]
        out, final = function(x_last, weight[:, 0], bias, initial_states=initial, return_final_states=True,
                              activation="silu" if silu else None)
        return out.transpose(1, 2), final.transpose(1, 2)  # [b, s, c], [b, k-1, c]
    return kernel


def _causal_conv1d() -> Optional[Kernel]:
    try:
        from causal_conv1d import causal_conv1d_fn
    except ImportError:  # causal-conv1d is optional
        return None
    return _causal_conv1d_adapter(causal_conv1d_fn, reference_causal_conv)


def grouped_ssd_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                     D: torch.Tensor, chunk: int,
                     initial_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`ssd_chunked_scan` with B, C ``[b, s, g, n]`` in ``g`` groups of ``h / g`` heads each (Mamba2's
    B/C groups), through mamba_ssm's kernel where it imports (:data:`SSD_SCAN`)."""
    return ssd_scan_kernel(x.device.type)[1](x, dt, A, B, C, D, chunk, initial_state)


def _reference_grouped_ssd(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                           D: torch.Tensor, chunk: int,
                           initial_state: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    per_group = x.size(2) // B.size(2)
    B, C = (t.repeat_interleave(per_group, dim=2) for t in (B, C))  # [b, s, h, n]
    return ssd_chunked_scan(x, dt, A, B, C, D, chunk, initial_state)


def _mamba_chunk_scan_adapter(function: Kernel, reference: Kernel) -> Kernel:
    """:func:`grouped_ssd_scan`'s signature over ``mamba_chunk_scan_combined`` (which takes the groups as they
    are, the initial state and the final state's gradient); a chunk that is not a power of two (its Triton
    blocks) takes ``reference``."""
    def kernel(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
               D: torch.Tensor, chunk: int,
               initial_state: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        if chunk & (chunk - 1):
            return reference(x, dt, A, B, C, D, chunk, initial_state)
        out, final = function(x, dt, A, B, C, chunk, D=D, initial_states=initial_state,
                              return_final_states=True)  # [b, s, h, p] in x's dtype, [b, h, p, n]
        return out.float(), final.float()
    return kernel


def _mamba_chunk_scan() -> Optional[Kernel]:
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except ImportError:  # mamba_ssm is optional
        return None
    return _mamba_chunk_scan_adapter(mamba_chunk_scan_combined, _reference_grouped_ssd)


def selective_scan_dispatch(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                            D: torch.Tensor, initial_state: Optional[torch.Tensor] = None,
                            state_leaves: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """:func:`selective_scan` through mamba_ssm's kernel where it serves the call (:data:`SELECTIVE_SCAN`);
    ``state_leaves``: the final state goes on to another rank's tokens (a CP chain), so its gradient counts."""
    return selective_scan_kernel(x.device.type)[1](x, dt, A, B, C, D, initial_state, state_leaves)


def _reference_selective_scan(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                              D: torch.Tensor, initial_state: Optional[torch.Tensor],
                              state_leaves: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    return selective_scan(x, dt, A, B, C, D, initial_state)


def _selective_scan_adapter(function: Kernel, reference: Kernel) -> Kernel:
    """:func:`selective_scan_dispatch`'s signature over ``selective_scan_fn`` (u, delta ``[b, d, s]`` in one
    dtype, B/C ``[b, n, s]`` or ``[b, g, n, s]`` in it too, A and D fp32). The kernel starts from zeros and
    drops its final state's gradient: a call with an initial state, or whose state leaves under autograd, takes
    ``reference``."""
    def kernel(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
               D: torch.Tensor, initial_state: Optional[torch.Tensor],
               state_leaves: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        if initial_state is not None or (state_leaves and torch.is_grad_enabled()):
            return reference(x, dt, A, B, C, D, initial_state, state_leaves)
        dtype = x.dtype
        along_seq = (lambda t: t.to(dtype).transpose(1, 2)) if B.dim() == 3 else (
            lambda t: t.to(dtype).permute(0, 2, 3, 1))  # [b, n, s] / [b, g, n, s]
        y, state = function(x.transpose(1, 2), dt.to(dtype).transpose(1, 2), A.float(), along_seq(B), along_seq(C),
                            D.float(), return_last_state=True)  # [b, d, s], [b, d, n]
        return y.transpose(1, 2).float(), state.float()
    return kernel


def _mamba_selective_scan() -> Optional[Kernel]:
    try:
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except ImportError:
        return None
    return _selective_scan_adapter(selective_scan_fn, _reference_selective_scan)


CAUSAL_CONV = FusedOp("causal_conv1d", "causal-conv1d", reference_causal_conv,
                      kernels_by_device(causal_conv1d=("causal_conv1d", _causal_conv1d)),
                      compilable=False, kernels_by_default=True)
SSD_SCAN = FusedOp("ssd_scan", "mamba_ssm", _reference_grouped_ssd,
                   kernels_by_device(mamba_ssm=("mamba_ssm", _mamba_chunk_scan)), reference_name="chunked",
                   compilable=False, kernels_by_default=True)
SELECTIVE_SCAN = FusedOp("selective_scan", "mamba_ssm", _reference_selective_scan,
                         kernels_by_device(mamba_ssm=("mamba_ssm", _mamba_selective_scan)),
                         reference_name="sequential", compilable=False, kernels_by_default=True)


@kernel_choice
def causal_conv_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """The causal conv for tensors on ``device_type``: ("causal_conv1d" | "reference", function)."""
    return decide_kernel(CAUSAL_CONV, device_type, fused)


@kernel_choice
def ssd_scan_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """Mamba2's scan for tensors on ``device_type``: ("mamba_ssm" | "chunked", function)."""
    return decide_kernel(SSD_SCAN, device_type, fused)


@kernel_choice
def selective_scan_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """Mamba's scan for tensors on ``device_type``: ("mamba_ssm" | "sequential", function)."""
    return decide_kernel(SELECTIVE_SCAN, device_type, fused)


class GatedGroupRMSNorm(nn.Module):
    """Mamba2's gated norm: ``weight * g / rms_group(g)`` with ``g = y * silu(z)`` (``g = y`` without ``z``), RMS
    over groups of channels.

    ``shard`` splits the ``d_inner`` channels over TP by heads. With at least as many groups as TP ranks
    each rank normalises its own groups; with fewer, a group spans ``tp / groups`` ranks and its sum of
    squares is summed over them (one all-reduce of a per-group buffer, forward and backward).
    """

    def __init__(self, d_inner: int, groups: int, eps: float, shard: TPShard, group: Group,
                 dtype: Optional[torch.dtype] = None, norm_before_gate: bool = False) -> None:
        super().__init__()
        tp = group.size
        self.eps, self.group, self.groups, self.group_size = eps, group, groups, d_inner // groups
        self.norm_before_gate = norm_before_gate  # weight * norm(y) * silu(z) (Falcon-H1's norm_before_gate)
        self.local_groups = max(groups // tp, 1)
        self.weight = mark_param(nn.Parameter(torch.empty(shard.local_size(tp), dtype=dtype)), init="ones",
                                 tp_shard=shard)

    def forward(self, y: torch.Tensor, z: Optional[torch.Tensor] = None) -> torch.Tensor:
        # y, z [..., d_inner/tp]; z None: no gate (MiniMax's lightning-attention norm)
        dtype = y.dtype
        gate_first = z is not None and not self.norm_before_gate
        gated = y.float() * F.silu(z.float()) if gate_first else y.float()
        grouped = gated.view(*gated.shape[:-1], self.local_groups, -1)  # [..., local groups, channels]
        squares = grouped.pow(2).sum(-1, keepdim=True)  # [..., local groups, 1]
        if self.groups < self.group.size:  # this rank holds part of one group: sum it over the ranks sharing it
            mine = self.group.rank * self.groups // self.group.size
            slot = F.one_hot(torch.tensor(mine, device=y.device), self.groups).to(squares.dtype)  # [groups]
            slots = sum_partials_over_tensor_model_parallel_region(squares[..., 0] * slot, self.group)  # [..., groups]
            squares = slots[..., mine:mine + 1, None]  # [..., 1, 1] the whole group's sum
        normed = (grouped * torch.rsqrt(squares / self.group_size + self.eps)).view_as(gated)
        if z is not None and self.norm_before_gate:
            normed = normed * F.silu(z.float())
        return self.weight * normed.to(dtype)


def scaled(x: torch.Tensor, multiplier: Optional[float]) -> torch.Tensor:
    """``x`` times a muP ``multiplier`` flag (None: 1, no multiply)."""
    return x if multiplier is None else x * multiplier


def split_vector(shard: TPShard, tp: int, init: str, dtype: Optional[torch.dtype],
                 *extra_dims: int) -> nn.Parameter:
    """A TP-split parameter of local shape ``[local, *extra_dims]`` (A_log, D, dt_bias of the recurrent
    mixers), split by ``shard``."""
    return mark_param(nn.Parameter(torch.empty(shard.local_size(tp), *extra_dims, dtype=dtype)), init=init,
                      tp_shard=shard)


class MambaMixer(nn.Module):
    """The Mamba (``mamba_version`` 1) or Mamba2 (2) mixer; ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype, inner = self.group.size, config.params_dtype, config.mamba_d_inner
        self.local_inner = inner // tp
        if config.mamba_version == 1:
            channels = Segment(inner)
            in_segments, conv_segments = (channels, channels), (channels,)  # in_proj [x; z]
        else:
            heads = Segment(config.mamba_num_heads, config.mamba_head_dim)
            groups = Segment(config.mamba_num_groups, config.mamba_state_dim)
            in_segments = (heads, heads, groups, groups, Segment(config.mamba_num_heads))  # [z; x; B; C; dt]
            conv_segments = (heads, groups, groups)  # [x; B; C]
        self.in_proj = ColumnParallelLinear(
            config.hidden_size, sum(seg.size for seg in in_segments), group=self.group,
            bias=config.add_bias_linear, sequence_parallel=config.sequence_parallel, segments=in_segments,
            dtype=dtype)
        self.in_split = [seg.local_units(tp) * seg.unit_size for seg in in_segments]
        conv_shard = TPShard(0, conv_segments)
        self.conv_split = [seg.local_units(tp) * seg.unit_size for seg in conv_segments]
        conv_channels = conv_shard.local_size(tp)
        self.conv1d = nn.Conv1d(conv_channels, conv_channels, config.mamba_d_conv, groups=conv_channels,
                                bias=config.mamba_conv_bias, dtype=dtype)
        mark_param(self.conv1d.weight, init="normal", tp_shard=conv_shard)
        if self.conv1d.bias is not None:
            mark_param(self.conv1d.bias, init="zeros", tp_shard=conv_shard)
        if config.mamba_version == 1:
            self._build_mamba1_params(config, tp, dtype)
        else:
            self._build_mamba2_params(config, tp, dtype)
        out_segment = (Segment(inner),) if config.mamba_version == 1 else (in_segments[0],)
        self.out_proj = RowParallelLinear(inner, config.hidden_size, group=self.group, bias=config.add_bias_linear,
                                          sequence_parallel=config.sequence_parallel, segments=out_segment,
                                          dtype=dtype)

    def _build_mamba1_params(self, config: TransformerConfig, tp: int, dtype: Optional[torch.dtype]) -> None:
        channels = TPShard.even(0, config.mamba_d_inner)
        rank, state_dim = config.mamba_dt_rank_or_default, config.mamba_state_dim
        self.ssm_heads = config.mamba1_heads // tp if config.mamba1_heads > 1 else 1  # this rank's SSMs
        if config.mamba1_heads > 1:  # Zamba: a block per head, [h/tp * (r+2n), p], heads split over TP
            self.x_proj = nn.Linear(config.mamba_head_dim, self.ssm_heads * (rank + 2 * state_dim), bias=False,
                                    dtype=dtype)
            x_proj_shard = TPShard(0, (Segment(config.mamba1_heads, rank + 2 * state_dim),))
        else:  # one SSM over every channel: [r+2n, d/tp], the channels split over TP
            self.x_proj = nn.Linear(self.local_inner, rank + 2 * state_dim, bias=False, dtype=dtype)
            x_proj_shard = TPShard.even(1, config.mamba_d_inner)
        mark_param(self.x_proj.weight, init="normal", tp_shard=x_proj_shard)
        self.dt_proj = nn.Linear(rank, self.local_inner, bias=True, dtype=dtype)  # [d/tp, r]
        mark_param(self.dt_proj.weight, init="normal", tp_shard=channels)
        mark_param(self.dt_proj.bias, init="mamba_dt_bias", tp_shard=channels)
        self.A_log = split_vector(channels, tp, "mamba_a_log_arange", dtype, state_dim)  # [d/tp, n]
        self.D = split_vector(channels, tp, "ones", dtype)  # [d/tp]
        if config.mamba_mixer_rms_weights:  # Jamba: replicated, each rank's channels give part of their grads
            eps = config.mamba_mixer_rms_eps
            self.dt_layernorm = RMSNorm(rank, eps, grad_partial_over_tp=True, dtype=dtype)
            self.b_layernorm = RMSNorm(state_dim, eps, grad_partial_over_tp=True, dtype=dtype)
            self.c_layernorm = RMSNorm(state_dim, eps, grad_partial_over_tp=True, dtype=dtype)

    def _build_mamba2_params(self, config: TransformerConfig, tp: int, dtype: Optional[torch.dtype]) -> None:
        heads = TPShard.even(0, config.mamba_num_heads)
        self.dt_bias = split_vector(heads, tp, "mamba_dt_bias", dtype)  # [h/tp]
        self.A_log = split_vector(heads, tp, "mamba_a_log_uniform", dtype)  # [h/tp]
        self.D = split_vector(heads, tp, "ones", dtype)  # [h/tp]
        self.norm = None  # --disable-mamba-rmsnorm: y * silu(z) without a norm (Falcon-H1)
        if config.mamba_rmsnorm:
            norm_shard = TPShard(0, (Segment(config.mamba_num_heads, config.mamba_head_dim),))
            self.norm = GatedGroupRMSNorm(config.mamba_d_inner, config.mamba_num_groups, config.norm_epsilon,
                                          norm_shard, self.group, dtype=dtype,
                                          norm_before_gate=config.mamba_norm_before_gate)

    def forward(self, hidden: torch.Tensor, layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); layout: this rank's tokens and documents
        cfg = self.config
        hidden = scaled(hidden, cfg.ssm_in_multiplier)
        projected = self.in_proj(hidden).transpose(0, 1)  # [b, s, in/tp] over this rank's full sequence
        if cfg.ssm_multipliers:  # Falcon-H1's muP vector: one scale per part [z; x; B; C; dt]
            projected = projected * torch.cat([projected.new_full((width,), scale) for width, scale
                                               in zip(self.in_split, cfg.ssm_multipliers)])
        if cfg.mamba_version == 1:
            x, z = projected.split(self.in_split, dim=-1)  # [b, s, d/tp] each
            core = functools.partial(self._mamba1_core, state_leaves=carries_across_ranks(layout))
            y = sequence_scan(core, x, layout)  # [b, s, d/tp] fp32
            y = (y * F.silu(z.float())).to(projected.dtype)
        else:
            z, xbc_dt = projected.split([self.in_split[0], sum(self.in_split[1:])], dim=-1)
            y = sequence_scan(self._mamba2_core, xbc_dt, layout)  # [b, s, d/tp] fp32
            y = (self.norm(y, z) if self.norm is not None else y * F.silu(z.float())).to(projected.dtype)
        return scaled(self.out_proj(y.transpose(0, 1)), cfg.ssm_out_multiplier)  # [s, b, h] ([s/tp, b, h] SP)

    def _conv(self, x: torch.Tensor, previous: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        """SiLU of the causal conv continuing from the ``previous`` inputs; and the last ``d_conv - 1`` inputs."""
        # [b, s, c], [b, d_conv-1, c]
        return carried_causal_conv(x, self.conv1d.weight, self.conv1d.bias, previous, silu=True)

    def _dt(self, dt: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """softplus(dt + bias) in fp32, clamped to ``--mamba-dt-limit-min/max``."""
        cfg = self.config
        dt = F.softplus(dt.float() + bias.float())
        if cfg.mamba_dt_limit_min > 0.0 or cfg.mamba_dt_limit_max is not None:
            dt = dt.clamp(min=cfg.mamba_dt_limit_min, max=cfg.mamba_dt_limit_max)
        return dt

    def _mamba1_core(self, x: torch.Tensor, carry: Optional[Carry],
                     state_leaves: bool = False) -> Tuple[torch.Tensor, Carry]:
        """Mamba's sequence work (conv, dt/B/C, scan) on ``x`` ``[b, s, d/tp]`` (before the conv) from
        ``carry`` = (conv inputs ``[b, d_conv-1, d/tp]``, state ``[b, d/tp, n]`` fp32); None: a start.
        ``state_leaves``: the carry goes on to another CP rank (the scan's kernel cannot backpropagate it)."""
        cfg = self.config
        previous, state = carry if carry is not None else (None, None)
        x, last_inputs = self._conv(x, previous)
        if cfg.mamba1_heads > 1:
            y, state = self._mamba1_heads_scan(x, state, state_leaves)
            return y, (last_inputs, state)
        # every rank's channels contribute to dt, B and C: sum the partial products over TP
        dt_b_c = sum_partials_over_tensor_model_parallel_region(linear(x, self.x_proj.weight), self.group)
        rank, state_dim = cfg.mamba_dt_rank_or_default, cfg.mamba_state_dim
        dt, B, C = dt_b_c.split([rank, state_dim, state_dim], dim=-1)  # [b, s, r], [b, s, n], [b, s, n]
        if cfg.mamba_mixer_rms_weights:  # Jamba
            dt, B, C = self.dt_layernorm(dt), self.b_layernorm(B), self.c_layernorm(C)
        elif cfg.mamba_mixer_rms_eps is not None:  # FalconMamba
            dt, B, C = (weightless_rms_norm(t, cfg.mamba_mixer_rms_eps) for t in (dt, B, C))
        dt = self._dt(linear(dt, self.dt_proj.weight), self.dt_proj.bias)  # [b, s, d/tp]
        A = -torch.exp(self.A_log.float())  # [d/tp, n]
        y, state = selective_scan_dispatch(x, dt, A, B, C, self.D, state, state_leaves)  # [b, s, d/tp], [b, d/tp, n]
        return y, (last_inputs, state)

    def _mamba1_heads_scan(self, x: torch.Tensor, state: Optional[torch.Tensor],
                           state_leaves: bool) -> Tuple[torch.Tensor, torch.Tensor]:
        """Zamba's multi-head Mamba1 on this rank's heads: each head's ``p`` channels make their own dt, B and
        C (its block of ``x_proj`` and ``dt_proj``) and scan with them (one scan over every head). x
        ``[b, s, d/tp]`` (after the conv); state ``[b, d/tp, n]`` fp32 or None. Returns y ``[b, s, d/tp]`` and
        the new state."""
        cfg = self.config
        rank, state_dim = cfg.mamba_dt_rank_or_default, cfg.mamba_state_dim
        head_dim, heads = cfg.mamba_head_dim, self.ssm_heads
        batch, seq = x.shape[:2]
        x_heads = x.reshape(batch, seq, heads, head_dim)  # [b, s, h/tp, p]
        x_proj = self.x_proj.weight.reshape(heads, rank + 2 * state_dim, head_dim)  # [h/tp, r+2n, p]
        dt_b_c = torch.einsum("bshp,hkp->bshk", x_heads, x_proj)  # [b, s, h/tp, r+2n]
        dt, B, C = dt_b_c.split([rank, state_dim, state_dim], dim=-1)  # [b, s, h/tp, r], [b, s, h/tp, n] x 2
        dt_proj = self.dt_proj.weight.reshape(heads, head_dim, rank)  # [h/tp, p, r]
        dt = self._dt(torch.einsum("bshr,hpr->bshp", dt, dt_proj).reshape(batch, seq, -1),
                      self.dt_proj.bias)  # [b, s, d/tp]
        A = -torch.exp(self.A_log.float())  # [d/tp, n]
        return selective_scan_dispatch(x, dt, A, B, C, self.D, state, state_leaves)  # [b, s, d/tp], [b, d/tp, n]

    def _mamba2_core(self, xbc_dt: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """Mamba2's sequence work (conv, SSD scan) on ``[x; B; C; dt]`` ``[b, s, .]`` from ``carry`` =
        (conv inputs ``[b, d_conv-1, conv channels/tp]``, state ``[b, h/tp, p, n]`` fp32); None: a start.
        Returns ``y`` ``[b, s, d/tp]`` (fp32, before the gated norm)."""
        cfg = self.config
        previous, state = carry if carry is not None else (None, None)
        xbc, dt = xbc_dt.split([sum(self.in_split[1:4]), self.in_split[4]], dim=-1)
        conv_out, last_inputs = self._conv(xbc, previous)
        x, B, C = conv_out.split(self.conv_split, dim=-1)  # [b, s, d/tp], [b, s, g_local * n] x 2
        batch, seq = x.shape[:2]
        heads = dt.size(-1)
        B, C = (t.reshape(batch, seq, -1, cfg.mamba_state_dim) for t in (B, C))  # [b, s, g/tp, n] (g < tp: 1)
        y, state = grouped_ssd_scan(x.reshape(batch, seq, heads, cfg.mamba_head_dim), self._dt(dt, self.dt_bias),
                                    -torch.exp(self.A_log.float()), B, C, self.D, cfg.mamba_chunk_size,
                                    state)  # [b, s, h/tp, p], [b, h/tp, p, n]
        return y.reshape(batch, seq, -1), (last_inputs, state)
