"""Lightning attention, the linear-attention token mixer of MiniMax-Text-01 (``minimax``).

Per head the state ``S`` is a ``[dv, dk]`` matrix (fp32) that decays by a fixed factor per token and
takes each token's key-value product; the query reads it::

    S_t = exp(-lambda_h) S_{t-1} + v_t k_t^T        o_t = S_t q_t

There is no softmax, no query scaling and no learned decay: ``lambda_h`` is a per-head rate fixed by the
head and the layer's depth (:func:`lightning_slopes`), ALiBi's geometric slopes ``2^(-8 (h+1) / H)``
times ``1 - l / (L - 1) + 1e-5``, so the last layer barely forgets. The mixer around the recurrence::

    q, k, v = silu(W_qkv x)                       per head [q_h; k_h; v_h] rows (transformers' qkv_proj)
    o       = lightning(q, k, v)                  [h, d] per token
    y       = W_out (rms_norm(o) * sigmoid(W_gate x))   the norm over all heads' channels together

This is Mamba2's scalar-decay SSD with one group per head, ``dt = 1``, ``A = -lambda``, ``B = k``,
``C = q``, ``x = v`` and no skip: :func:`lightning_attention_chunked` runs
:func:`core.transformer.mamba_mixer.ssd_chunked_scan`, ``[chunk, chunk]`` blocks per chunk, so memory
grows linearly with the sequence (transformers' own loop uses the same blocks of ``block_size``, our
``--linear-chunk-size``; the result does not depend on it beyond rounding). Where flash-linear-attention
imports, bf16/fp16 runs take its ``chunk_simple_gla`` (the one dispatch of the fused kernels; fp32 keeps the
reference).
:func:`lightning_attention_recurrent` is the definition, token by token, for the tests.

The recurrence is the stateful core (:mod:`core.transformer.sequence_state`; carry = the state
``[b, h, dv, dk]``), so packed documents restart at every document and CP ranks pass the state on.

Tensor parallelism splits the heads: ``in_proj`` is column-parallel with rows ``[qkv; gate]`` (one
:class:`Segment` of ``3 d`` per head, one of ``d``), ``out_proj`` row-parallel, the slopes follow their
heads. The norm spans every head, so under TP its sum of squares is all-reduced over the ranks
(:class:`core.transformer.mamba_mixer.GatedGroupRMSNorm` with one group and no gate); its weight splits
with the heads. Under sequence parallelism ``in_proj`` all-gathers the sequence and ``out_proj``
reduce-scatters it. The converter fuses transformers' ``qkv_proj`` and ``output_gate`` into ``in_proj``.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import kernels_by_device
from core.fused import FusedOp, Kernel, decide_kernel, kernel_choice
from core.parallel_state import ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
from core.tensor_parallel.param_meta import Segment, TPShard
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import GatedGroupRMSNorm, ssd_chunked_scan
from core.transformer.sequence_state import Carry, sequence_scan

NORM_EPS = 1e-6  # transformers' MiniMaxRMSNorm default, which its lightning layers keep (not rms_norm_eps)


def lightning_slopes(heads: int, layer_number: int, num_layers: int) -> torch.Tensor:
    """The decay rate ``lambda`` of each head ``[heads]`` (fp32) of layer ``layer_number`` (from 0) of
    ``num_layers``: ``2^(-8 (h + 1) / heads) * (1 - layer / (num_layers - 1 + 1e-5) + 1e-5)``."""
    base = 1.0 / (2.0 ** (8.0 / heads))
    depth = 1.0 - layer_number / (num_layers - 1 + 1e-5) + 1e-5
    return base ** torch.arange(1, heads + 1, device="cpu") * depth  # fp32, as transformers computes it


def lightning_attention_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor,
                                  initial_state: Optional[torch.Tensor] = None
                                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The recurrence token by token in fp32: q, k ``[b, s, h, dk]``, v ``[b, s, h, dv]``, slopes ``[h]``,
    initial_state ``[b, h, dv, dk]`` (None: zeros). Returns o ``[b, s, h, dv]`` (q's dtype) and the state."""
    q32, k32, v32 = q.float(), k.float(), v.float()
    state = (q32.new_zeros(q.size(0), q.size(2), v.size(-1), k.size(-1)) if initial_state is None
             else initial_state.float())
    decay = torch.exp(-slopes.float())[None, :, None, None]  # [1, h, 1, 1]
    outputs = []
    for t in range(q.size(1)):
        state = decay * state + v32[:, t, :, :, None] * k32[:, t, :, None, :]  # [b, h, dv, dk]
        outputs.append(torch.einsum("bhvk,bhk->bhv", state, q32[:, t]))
    return torch.stack(outputs, dim=1).to(q.dtype), state


def lightning_attention_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor,
                                chunk_size: int = 64, initial_state: Optional[torch.Tensor] = None
                                ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The recurrence in chunks (module docstring), same arguments and results as
    :func:`lightning_attention_recurrent`."""
    heads = q.size(2)
    dt = q.new_ones(q.shape[:3], dtype=torch.float32)  # [b, s, h]
    skip = torch.zeros(heads, dtype=torch.float32, device=q.device)
    out, state = ssd_chunked_scan(v, dt, -slopes.float(), k, q, skip, chunk_size, initial_state)
    return out.to(q.dtype), state


def _fla_simple_gla() -> Optional[Kernel]:
    """flash-linear-attention's ``chunk_simple_gla`` (a scalar log decay per head, ``g_gamma = -lambda``, no query
    scaling) under our signature; its state is ``[b, h, dk, dv]``, ours ``[b, h, dv, dk]``. fla refuses fp32
    inputs: those (the exact path) take the chunked reference."""
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except ImportError:  # flash-linear-attention is optional
        return None

    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slopes: torch.Tensor, chunk_size: int = 64,
               initial_state: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        if q.dtype == torch.float32:
            return lightning_attention_chunked(q, k, v, slopes, chunk_size, initial_state)
        start = None if initial_state is None else initial_state.float().transpose(-1, -2).contiguous()
        out, state = chunk_simple_gla(q, k, v, g_gamma=-slopes.float(), scale=1.0, initial_state=start,
                                      output_final_state=True)
        return out.to(q.dtype), state.float().transpose(-1, -2)
    return kernel


# fla's kernel whenever it imports (no flag asks for it), else the chunked reference; never torch.compile'd
LIGHTNING = FusedOp("lightning_attention", "flash-linear-attention", lightning_attention_chunked,
                    kernels_by_device(fla=("fla", _fla_simple_gla)), reference_name="chunked", compilable=False,
                    kernels_by_default=True)


@kernel_choice
def lightning_attention_kernel(device_type: str, fused: bool = False) -> Tuple[str, Kernel]:
    """Lightning attention for tensors on ``device_type``: ("fla" | "chunked", function)."""
    return decide_kernel(LIGHTNING, device_type, fused)


class LightningAttention(nn.Module):
    """MiniMax's lightning-attention mixer (module docstring); ``[s, b, h]`` in and out (``[s/tp, b, h]`` under
    SP). Heads and head dim: ``--linear-num-value-heads`` and ``--linear-value-head-dim`` (equal to the key
    ones, checked by the config)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        tp, dtype = self.group.size, config.params_dtype
        heads, dim = config.linear_num_value_heads, config.linear_value_head_dim
        self.local_heads, self.head_dim, self.chunk_size = heads // tp, dim, config.linear_chunk_size
        segments = (Segment(heads, 3 * dim), Segment(heads, dim))  # [qkv (per head q; k; v); gate]
        self.in_proj = ColumnParallelLinear(config.hidden_size, 4 * heads * dim, group=self.group, bias=False,
                                            sequence_parallel=config.sequence_parallel, segments=segments,
                                            dtype=dtype)
        self.in_split = [seg.local_units(tp) * seg.unit_size for seg in segments]
        self.norm = GatedGroupRMSNorm(heads * dim, 1, NORM_EPS, TPShard(0, (Segment(heads, dim),)), self.group,
                                      dtype=dtype)
        self.out_proj = RowParallelLinear(heads * dim, config.hidden_size, group=self.group, bias=False,
                                          sequence_parallel=config.sequence_parallel,
                                          segments=(Segment(heads, dim),), dtype=dtype)
        first = self.group.rank * self.local_heads
        noops = config.noop_layers  # the depth counts real layers: inserting noop layers changes nothing
        depth = layer_number - sum(1 for noop in noops if noop < layer_number)
        # [h/tp] fixed rates, kept off the module's buffers (a meta-built model zeroes those) and made on use
        self.slopes = lightning_slopes(heads, depth, config.num_layers - len(noops))[first:first + self.local_heads]

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple] = None,
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); rotary unused (no positions)
        qkv, gate = self.in_proj(hidden).split(self.in_split, dim=-1)  # [s, b, 3 h/tp d], [s, b, h/tp d]
        core_out = sequence_scan(self._core, qkv.transpose(0, 1), layout)  # [b, s, h/tp * d]
        normed = self.norm(core_out.transpose(0, 1))  # [s, b, h/tp * d]
        return self.out_proj(normed * torch.sigmoid(gate))  # [s, b, h] ([s/tp, b, h] under SP)

    def _core(self, inputs: torch.Tensor, carry: Optional[Carry]) -> Tuple[torch.Tensor, Carry]:
        """SiLU and the recurrence: inputs ``[b, s, h/tp * 3d]`` -> ``[b, s, h/tp * d]``; carry = (the state
        ``[b, h/tp, d, d]`` fp32,)."""
        batch, seq = inputs.shape[:2]
        q, k, v = F.silu(inputs).view(batch, seq, self.local_heads, 3 * self.head_dim).split(self.head_dim, -1)
        if self.slopes.device != q.device:  # made on the CPU at build; moved once, not on every call
            self.slopes = self.slopes.to(q.device)
        kernel = lightning_attention_kernel(q.device.type)[1]
        out, state = kernel(q, k, v, self.slopes, self.chunk_size, carry[0] if carry is not None else None)
        return out.reshape(batch, seq, -1), (state,)
