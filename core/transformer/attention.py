"""Causal self-attention with MHA/GQA/MQA heads split over tensor parallelism.

The fused QKV weight is ``[Q heads; K heads; V heads]`` (each a
:class:`Segment` of heads). Query heads split over TP; key/value heads split
too, or are replicated when TP exceeds their number (each rank then holds the
one KV head its query heads use). The attention kernel is PyTorch's
``scaled_dot_product_attention``, which picks a flash kernel when one exists;
attention-logit softcapping (Gemma2) takes an explicit path with the same
masking. The q/k norm is ``config.qk_norm``: per-head norms (``per_head``) act before RoPE
(after it with ``--qk-layernorm-after-rope``); their weights are shared by all heads, so their gradient is
a partial sum over TP ranks (``non_parametric``: without weight; ``per_head_weights``: a weight per head;
``full_width``: one norm over all heads' channels). ``--attn-sub-norm`` (BitNet)
RMS-normalises the context over all heads' channels (sum of squares all-reduced over TP) before the output
projection. A layer's sliding window comes from ``config.layer_window``; layers in
``config.no_rope_layers`` skip RoPE (and ``--qk-norm l2``'s weightless q/k norms, which the other layers apply
after RoPE: Llama 4). With ``--position-embedding-type alibi`` the mask is an additive float
one carrying each local head's ALiBi bias (``core/transformer/alibi.py``). ``--attention-chunk-size``
limits each token to its chunk (``config.layer_chunk``). ``--attention-output-gate`` projects a gate per
query channel with q/k/v (a fourth segment, split over TP with the heads) and multiplies the context by its
sigmoid; with ``--attention-output-gate-per-head`` the segment has one row per head, whose sigmoid scales all of
that head's channels (LFM3). ``--softmax-type off-by-one|learnable`` adds one extra logit per row (zero, or a
trained one per head: attention sinks) that takes probability mass and is then dropped; like softcapping it takes the
explicit path.

``--use-flash-attn`` sends plain causal attention over a whole sequence (a sliding window included) through
one dispatch (``core/fused.py``): flash-attn's ``flash_attn_func`` on CUDA (bf16/fp16), the vendor library's
fusion attention on an NPU. A call the kernel cannot serve (documents, context parallelism, ALiBi,
softcapping, sinks, a KV cache, chunks, fp32) and every call on other devices take the SDPA path (``"sdpa"``),
which passes ``is_causal=True`` and no mask for plain causal attention. Multi-latent attention keeps SDPA (its
value head dim differs from the query/key one).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.device import gemm_dtype, kernels_by_device, vendor_kernel_name, vendor_op
from core.fused import FusedOp, decide_kernel, kernel_choice, register_fused_op
from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import checkpoint, inside_checkpoint
from core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear, Segment, mark_param
from core.tensor_parallel.param_meta import TPShard
from core.tensor_parallel.random import get_rng_tracker
from core.transformer.alibi import alibi_attention_mask, alibi_bias
from core.transformer.attention_mask import attention_allowed
from core.transformer.config import PER_HEAD_QK_NORMS, TransformerConfig
from core.transformer.context_parallel import SequenceLayout, attend
from core.transformer.norms import NonParametricNorm, PerHeadNorm, TensorParallelRMSNorm, build_norm
from core.transformer.qk_clip import group_eta, local_rows, record_max_logits, unit_factors
from core.transformer.rope import apply_rope, layer_rotary


def sliding_window_mask(seq_len: int, window: Optional[int], device: torch.device,
                        chunk: Optional[int] = None) -> Optional[torch.Tensor]:
    """Boolean ``[s, s]`` mask (True = attend) letting query i see keys ``i - window < j <= i`` and, with
    ``chunk``, only keys of its own chunk (``j // chunk == i // chunk``).

    None when neither restricts a sequence this long: plain causal attention (and its flash kernel).
    """
    window = window if window is not None and window < seq_len else None
    chunk = chunk if chunk is not None and chunk < seq_len else None
    if window is None and chunk is None:
        return None
    positions = torch.arange(seq_len, device=device)
    return attention_allowed(positions, positions, window, chunk)


def causal_mask(seq_len: int, window: Optional[int], device: torch.device,
                chunk: Optional[int] = None) -> torch.Tensor:
    """Boolean ``[s, s]`` mask (True = attend): causal, limited to ``window`` keys or to ``chunk``s."""
    mask = sliding_window_mask(seq_len, window, device, chunk)
    if mask is None:
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()
    return mask


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float,
                       softcap: Optional[float], extra_logit: Optional[torch.Tensor], dropout: float) -> torch.Tensor:
    """``softmax(cap * tanh(q k^T * scale / cap) masked) v`` (softmax in fp32); q/k/v ``[b, n, s, hn]``.

    ``mask``: boolean (True = attend), or additive float (ALiBi bias, ``-inf`` = masked) added after the cap.
    ``softcap`` None: no cap. ``extra_logit`` ``[n]``: one more logit per head in every row of the softmax
    (``--softmax-type``), whose probability is dropped.
    """
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [b, n, s, s]
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    if extra_logit is not None:
        b, n, s, _ = scores.shape
        column = extra_logit.to(scores.dtype).view(1, n, 1, 1).expand(b, n, s, 1)
        scores = torch.cat([scores, column], dim=-1)  # [b, n, s, s + 1]
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32)
    if extra_logit is not None:
        probs = probs[..., :-1]  # [b, n, s, s]
    probs = probs.to(q.dtype)
    if dropout > 0:
        probs = F.dropout(probs, dropout, training=True)
    return torch.matmul(probs, v)  # [b, n, s, hn]


# (q [b, n, s, hn], k/v [b, nkv, s, hn], scale, dropout, window or None) -> [b, n, s, hn], or None: not served
AttentionKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float, float, Optional[int]],
                           Optional[torch.Tensor]]


def sdpa_path(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dropout: float,
              window: Optional[int]) -> Optional[torch.Tensor]:
    """The reference "kernel": None, so the caller runs its ``scaled_dot_product_attention`` path."""
    return None


FLASH_ATTN_DTYPES = (torch.float16, torch.bfloat16)  # flash-attn computes in half precision only
FLASH_ATTN_MAX_HEAD_DIM = 256  # and on head dims that are multiples of 8 up to this


def _flash_attn() -> Optional[AttentionKernel]:
    try:
        from flash_attn import flash_attn_func
    except ImportError:
        return None

    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dropout: float,
               window: Optional[int]) -> Optional[torch.Tensor]:
        if q.dtype not in FLASH_ATTN_DTYPES or q.size(-1) > FLASH_ATTN_MAX_HEAD_DIM or q.size(-1) % 8:
            return None
        out = flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), dropout_p=dropout,
                              softmax_scale=scale, causal=True,
                              window_size=(window - 1, 0) if window is not None else (-1, -1))  # [b, s, n, hn]
        return out.transpose(1, 2)  # [b, n, s, hn]
    return kernel


VENDOR_CAUSAL_MASK_SIZE = 2048  # the vendor's fusion attention takes a compressed causal mask (sparse_mode 2)


def _vendor_fusion_attention() -> Optional[AttentionKernel]:
    fusion_attention = vendor_op("fusion_attention")
    if fusion_attention is None:
        return None

    def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dropout: float,
               window: Optional[int]) -> Optional[torch.Tensor]:
        if window is not None:
            return None
        return fusion_attention(q, k, v, q.size(1), input_layout="BNSD", scale=scale, keep_prob=1.0 - dropout,
                                atten_mask=_vendor_causal_mask(q.device), sparse_mode=2)[0]
    return kernel


@functools.lru_cache(maxsize=None)
def _vendor_causal_mask(device: torch.device) -> torch.Tensor:
    """The vendor fusion attention's compressed causal mask ``[2048, 2048]`` (True = masked), made once per
    device."""
    size = VENDOR_CAUSAL_MASK_SIZE
    return torch.ones(size, size, dtype=torch.bool, device=device).triu(diagonal=1)


FLASH_ATTENTION = FusedOp("attention", "--use-flash-attn", sdpa_path,
                          kernels_by_device(flash_attn=("flash_attn", _flash_attn),
                                            vendor=(vendor_kernel_name("fusion_attention"), _vendor_fusion_attention)),
                          reference_name="sdpa", compilable=False)


@kernel_choice
def attention_kernel(device_type: str, fused: bool = False) -> Tuple[str, AttentionKernel]:
    """The attention kernel on ``device_type`` ("flash_attn" | the vendor's fusion attention | "sdpa"); ``fused``:
    ``--use-flash-attn``."""
    return decide_kernel(FLASH_ATTENTION, device_type, fused)


register_fused_op("attention", "use_flash_attn", attention_kernel)


class SelfAttention(nn.Module):
    """Standard self-attention of one layer: ``[s(/tp), b, input_size]`` in (the hidden size unless given: a
    shared block's ``2h``), ``[s(/tp), b, h]`` out."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0,
                 input_size: Optional[int] = None) -> None:
        super().__init__()
        tp_group = state.tp_group
        self.config = config
        self.layer_number = layer_number  # keys this layer's entry of a generation KV cache
        tp = tp_group.size
        hn = config.layer_kv_channels(layer_number)  # full-attention layers may have their own (Gemma4)
        heads, groups = config.num_attention_heads, config.layer_query_groups(layer_number)
        self.local_heads = heads // tp
        self.local_groups = max(groups // tp, 1)
        self.head_dim = hn
        self.k_eq_v = config.layer_k_eq_v(layer_number)  # V is K's projection: no V rows (Gemma4)
        # [Q; K; V] rows, without V when V is K's projection (Gemma4), plus the output gate split with the
        # query heads (--attention-output-gate)
        qkv_segments = (Segment(heads, hn), Segment(groups, hn)) + (() if self.k_eq_v else (Segment(groups, hn),))
        self.gate_width = (1 if config.attention_output_gate_per_head else hn) if config.attention_output_gate else 0
        if self.gate_width:  # one gate row per channel (Qwen3-Next) or per head (LFM3)
            qkv_segments += (Segment(heads, self.gate_width),)
        projection = ColumnParallelLinear(
            input_size or config.hidden_size, sum(segment.size for segment in qkv_segments), group=tp_group,
            bias=config.qkv_bias, sequence_parallel=config.sequence_parallel,
            segments=qkv_segments, dtype=config.params_dtype)
        if self.k_eq_v:
            self.linear_qk = projection  # [Q; K] rows
        else:
            self.linear_qkv = projection  # [Q; K; V] rows
        self.linear_proj = RowParallelLinear(
            heads * hn, config.hidden_size, group=tp_group, bias=config.dense_bias(layer_number),
            sequence_parallel=config.sequence_parallel, segments=(Segment(heads, hn),), dtype=config.params_dtype)
        self.window = config.layer_window(layer_number)
        self.chunk = config.layer_chunk(layer_number)
        self.softmax_offset = None  # --softmax-type learnable: one logit per head, split over TP with the heads
        if config.softmax_type == "learnable":
            self.softmax_offset = mark_param(nn.Parameter(torch.empty(self.local_heads, dtype=config.params_dtype)),
                                             init="zeros", tp_shard=TPShard(0, (Segment(heads, 1),)))
        self.first_head = tp_group.rank * self.local_heads  # global number of this rank's first query head
        self.tp_group = tp_group
        self.max_logits: Optional[torch.Tensor] = None  # --qk-clip: this step's largest logit per local head
        self.use_rope = layer_number not in config.no_rope_layers  # NoPE layers (SmolLM3)
        self.q_layernorm = self.k_layernorm = None
        if config.qk_norm == "full_width":  # one weight per q/k channel, split over TP with the heads
            self.q_layernorm, self.k_layernorm = (
                TensorParallelRMSNorm(segment, config.norm_epsilon, tp_group, config.params_dtype,
                                      config.apply_layernorm_1p) for segment in qkv_segments[:2])
        elif config.qk_norm == "per_head_weights":  # a weight per head, split over TP with the heads (Cohere)
            self.q_layernorm, self.k_layernorm = (
                PerHeadNorm(config.normalization, count, hn, config.norm_epsilon, tp, config.params_dtype,
                            config.apply_layernorm_1p, config.layernorm_bias) for count in (heads, groups))
        elif config.qk_norm in ("per_head", "non_parametric"):  # one weight per head dim (or none), shared by all
            norm_args = dict(kind=config.normalization, hidden_size=hn, eps=config.norm_epsilon,
                             grad_partial_over_tp=True, dtype=config.params_dtype,
                             offset=config.apply_layernorm_1p, bias=config.layernorm_bias,
                             parametric=config.qk_norm == "per_head", fused=config.use_fused_rmsnorm)
            self.q_layernorm, self.k_layernorm = build_norm(**norm_args), build_norm(**norm_args)
        self.sub_layernorm = None
        if config.attn_sub_norm:  # over all heads' channels, split over TP with the heads
            self.sub_layernorm = TensorParallelRMSNorm(Segment(heads, hn), config.norm_epsilon, tp_group,
                                                       config.params_dtype, config.apply_layernorm_1p)

        self.v_norm = NonParametricNorm("RMSNorm", config.norm_epsilon) if config.value_norm else None  # Gemma4
        # Llama 4: weightless q/k RMS norms after RoPE, on RoPE layers only (--qk-norm l2)
        self.qk_l2_norm = (NonParametricNorm("RMSNorm", config.norm_epsilon)
                           if config.qk_norm == "l2" and self.use_rope else None)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None, qkv_delta: Optional[torch.Tensor] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); layout None: causal over these tokens;
        # qkv_delta: added to the local [q; k; v] projection (a shared block's per-layer adapters)
        qkv = self.linear_qk(hidden) if self.k_eq_v else self.linear_qkv(hidden)  # [s, b, (np + 2|1 ng) hn] local
        if qkv_delta is not None:
            qkv = qkv + qkv_delta
        if self.config.qkv_clip is not None:  # Olmo
            qkv = qkv.clamp(-self.config.qkv_clip, self.config.qkv_clip)
        s, b = qkv.shape[:2]
        hn, nq, nkv = self.head_dim, self.local_heads, self.local_groups
        gate = None
        if self.gate_width:  # gate [s, b, np * hn], or [s, b, np] with one gate per head
            qkv, gate = qkv.split([qkv.size(-1) - nq * self.gate_width, nq * self.gate_width], dim=-1)
        if self.k_eq_v:  # the values are the keys' projection, before the key norm and RoPE
            q, k = qkv.split([nq * hn, nkv * hn], dim=-1)
            v = k
        else:
            q, k, v = qkv.split([nq * hn, nkv * hn, nkv * hn], dim=-1)
        if self.config.qk_norm == "full_width":  # over all heads' channels (all-reduced over TP)
            q, k = self.q_layernorm(q), self.k_layernorm(k)
        q = q.view(s, b, nq, hn)
        k = k.view(s, b, nkv, hn)
        v = v.view(s, b, nkv, hn)
        per_head_norms = self.config.qk_norm in PER_HEAD_QK_NORMS
        if per_head_norms and not self.config.qk_layernorm_after_rope:
            q, k = self.q_layernorm(q), self.k_layernorm(k)
        if self.v_norm is not None:
            v = self.v_norm(v)  # [s, b, nkv, hn]
        rotary = layer_rotary(rotary, self.window is not None)
        if rotary is not None:
            cos, sin, *query_scale = rotary  # query_scale [s, b|1, 1, 1] with --attn-temperature-beta
            if self.use_rope:
                interleaved = self.config.rope_interleaved
                fused = self.config.use_fused_rotary_pos_emb
                q, k = apply_rope(q, cos, sin, interleaved, fused), apply_rope(k, cos, sin, interleaved, fused)
            # the RoPE layers' queries are scaled, or with --attn-temperature-nope-layers the NoPE layers' (Llama 4)
            if query_scale and self.use_rope != self.config.attn_temperature_nope_layers:
                q = q * query_scale[0]
        if self.qk_l2_norm is not None:  # Llama 4
            q, k = self.qk_l2_norm(q), self.qk_l2_norm(k)
        if per_head_norms and self.config.qk_layernorm_after_rope:  # HunYuan
            q, k = self.q_layernorm(q), self.k_layernorm(k)
        if self._recompute_core_attention():  # selective recompute: softmax(QK^T)V and its dropout
            context = checkpoint(self._core_attention, q, k, v, layout)  # [s, b, np * hn]
        else:
            context = self._core_attention(q, k, v, layout)
        if gate is not None:  # Qwen3-Next per channel, LFM3 per head
            context = (context.view(s, b, nq, hn) * torch.sigmoid(gate).view(s, b, nq, self.gate_width)).flatten(2)
        if self.sub_layernorm is not None:  # BitNet
            context = self.sub_layernorm(context)
        return self.linear_proj(context)  # [s, b, h] ([s/tp, b, h] under SP)

    def _recompute_core_attention(self) -> bool:
        return (self.config.recompute_granularity == "selective" and self.training and torch.is_grad_enabled()
                and not inside_checkpoint())

    def qk_clip_rows(self, eta_heads: torch.Tensor, alpha: float) -> List[Tuple[nn.Parameter, torch.Tensor]]:
        """--qk-clip: the [Q; K; V (; gate)] projection's TP-local row factors (weight and bias) from each head's
        eta [heads]: per KV group, its query heads' rows times eta^alpha, its key rows times eta^(1 - alpha)."""
        groups = self.config.layer_query_groups(self.layer_number)
        eta = group_eta(eta_heads, groups)  # [groups]
        hn, heads = self.head_dim, eta_heads.numel()
        parts = [unit_factors(eta.repeat_interleave(heads // groups), [(hn, alpha)]),
                 unit_factors(eta, [(hn, 1.0 - alpha)]), unit_factors(eta, [(hn, 0.0)])]
        if self.gate_width:
            parts.append(torch.ones(heads * self.gate_width, device=eta.device))
        full = torch.cat(parts)  # [full rows]
        tp = self.tp_group
        return [(param, local_rows(full, param, tp.rank, tp.size))
                for param in (self.linear_qkv.weight, self.linear_qkv.bias) if param is not None]

    def _core_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        """q [s, b, np, hn], k/v [s, b, ng, hn] -> context [s, b, np * hn] (across CP ranks / within documents
        as ``layout`` says)."""
        s, b, nq, hn = q.shape
        if layout is None:
            out = self._local_attention(q, k, v)
        elif layout.cache is not None:  # generation: these tokens' K/V join the cached ones, attended by mask
            k, v = layout.cache.update(self.layer_number, k, v)  # [sk, b, ng, hn]
            out = self._local_attention(q, k, v, layout.positions, layout.cache.key_slots(),
                                        allowed=layout.cache.allowed(self.window, self.chunk))
        else:
            out = attend(q, k, v, layout, self._local_attention, self._scale(), self.window, self.chunk)
        return out.reshape(s, b, nq * hn)

    def _scale(self) -> float:
        cfg = self.config
        return cfg.attention_scale if cfg.attention_scale is not None else self.head_dim ** -0.5

    def _local_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         query_positions: Optional[torch.Tensor] = None, key_positions: Optional[torch.Tensor] = None,
                         documents: Optional[torch.Tensor] = None, first_head: int = 0,
                         allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Attention over the keys this rank holds: q [sq, b, n, hn], k/v [sk, b, nkv, hn] -> [sq, b, n, hn].

        Positions None: q and k are the same whole sequence (plain causal, the flash kernel when nothing else
        masks). ``first_head``: q's first head among this rank's heads (after a Ulysses all-to-all).
        ``allowed`` [b, 1, sq, sk]: a given boolean mask instead of the positions' rule (a KV cache's)."""
        sq, b, nq, hn = q.shape
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, hn]
        cfg = self.config
        extra_logit = self._extra_logit(q)
        if extra_logit is not None:
            extra_logit = extra_logit[first_head:first_head + nq]
        explicit = cfg.attn_logit_softcapping is not None or extra_logit is not None
        # a KV cache's step: SDPA reads each shared KV head for its query heads, no per-step copy of the cache
        shared_kv = k.size(1) != nq and allowed is not None and not explicit
        if k.size(1) != nq and not shared_kv:  # grouped-query attention: each KV head serves nq / nkv query heads
            repeat = nq // k.size(1)
            k = k.repeat_interleave(repeat, dim=1)
            v = v.repeat_interleave(repeat, dim=1)
        if cfg.qk_clip and self.training:
            mask = self._mask(q, query_positions, key_positions, documents, first_head, allowed)
            record_max_logits(self, q, k, mask if mask is None or mask.dtype == torch.bool else torch.isfinite(mask),
                              self._scale(), first_head)
        dropout = cfg.attention_dropout if self.training else 0.0
        fused = self._fused_attention(q, k, v, dropout, query_positions is None and allowed is None and not explicit)
        if fused is not None:
            return fused.permute(2, 0, 1, 3)  # [s, b, np, hn]
        # heads differ per TP rank, so does their dropout
        with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():
            mask = self._mask(q, query_positions, key_positions, documents, first_head, allowed)
            if explicit:
                mask = mask if mask is not None else causal_mask(sq, self.window, q.device, self.chunk)
                out = explicit_attention(q, k, v, mask, self._scale(), cfg.attn_logit_softcapping, extra_logit,
                                         dropout)
            else:
                compute = gemm_dtype(q)  # fp32 where half-precision GEMMs are slow (a CPU without bf16 units)
                if mask is not None and mask.is_floating_point():  # an additive mask (ALiBi) in the product's dtype
                    mask = mask.to(compute)
                causal = dict(is_causal=True) if mask is None else dict(attn_mask=mask)
                out = F.scaled_dot_product_attention(q.to(compute), k.to(compute), v.to(compute), dropout_p=dropout,
                                                     scale=cfg.attention_scale, enable_gqa=shared_kv,
                                                     **causal).to(q.dtype)  # [b, np, s, hn]
        return out.permute(2, 0, 1, 3)  # [s, b, np, hn]

    def _fused_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float,
                         whole_sequence: bool) -> Optional[torch.Tensor]:
        """``--use-flash-attn``'s kernel on q [b, np, s, hn], k/v [b, ng, s, hn] -> [b, np, s, hn] for causal
        attention over one whole sequence (``whole_sequence``: no positions, cache or explicit path), a sliding
        window allowed; None when the flag is off, there is no kernel, or it cannot serve this call."""
        cfg, seq_len = self.config, q.size(2)
        if not (cfg.use_flash_attn and whole_sequence) or cfg.position_embedding_type == "alibi":
            return None
        if self.chunk is not None and self.chunk < seq_len:
            return None
        kernel = attention_kernel(q.device.type, True)[1]
        window = self.window if self.window is not None and self.window < seq_len else None
        with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():  # per-rank heads' dropout
            return kernel(q, k, v, self._scale(), dropout, window)

    def _mask(self, q: torch.Tensor, query_positions: Optional[torch.Tensor], key_positions: Optional[torch.Tensor],
              documents: Optional[torch.Tensor], first_head: int,
              allowed: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
        """Boolean (True = attend) or, with ALiBi, additive mask for q [b, n, sq, hn]; None = plain causal.
        ``allowed``: the boolean mask to use instead of the positions' rule."""
        cfg = self.config
        alibi = cfg.position_embedding_type == "alibi"
        if query_positions is None:
            return self._alibi_mask(q.size(2), q, first_head) if alibi else sliding_window_mask(
                q.size(2), self.window, q.device, self.chunk)
        if allowed is None:
            allowed = attention_allowed(query_positions, key_positions, self.window, self.chunk, documents)
        if not alibi:
            return allowed  # [sq, sk] or [b, 1, sq, sk]
        bias = alibi_bias(cfg.num_attention_heads, self.first_head + first_head, q.size(1), key_positions,
                          cfg.alibi_bias_max)  # [n, 1, sk]
        return bias.masked_fill(~allowed, float("-inf")).to(q.dtype)  # [n | b, n, sq, sk]

    def _extra_logit(self, q: torch.Tensor) -> Optional[torch.Tensor]:
        """The extra softmax logit of each local head ``[np]`` (``--softmax-type``), None for vanilla."""
        if self.softmax_offset is not None:
            return self.softmax_offset
        if self.config.softmax_type == "off-by-one":
            return q.new_zeros(self.local_heads)
        return None

    def _alibi_mask(self, seq_len: int, q: torch.Tensor, first_head: int = 0) -> torch.Tensor:
        """The ALiBi bias with the causal (and sliding-window) mask of q's heads ``[n, s, s]``, the first being
        head ``first_head`` of this rank's."""
        cfg = self.config
        return alibi_attention_mask(cfg.num_attention_heads, self.first_head + first_head, q.size(1), seq_len,
                                    cfg.alibi_bias_max, self.window, q.device, q.dtype)
