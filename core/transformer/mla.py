"""Multi-latent attention (DeepSeek-V2/V3's MLA, MiniCPM3), chosen by ``--multi-latent-attention``.

Queries come from a low-rank latent, ``q = W_q_up(norm(W_q_down x))`` (``--q-lora-rank``), or from one
projection ``W_q x``; each head's query is ``[q_nope (qk_head_dim); q_pe (qk_pos_emb_head_dim)]``. Keys and
values share one compressed latent: ``W_kv_down x = [c_kv (kv_lora_rank); k_pe (qk_pos_emb_head_dim)]``,
``W_kv_up norm(c_kv)`` gives each head ``[k_nope; v]``, and the rope key ``k_pe`` is shared by all heads.
RoPE (the model's tables, sized ``qk_pos_emb_head_dim``) rotates ``q_pe`` and ``k_pe``;
``k = [k_nope; k_pe]``. The softmax scale is ``config.mla_softmax_scale`` (YaRN's mscale squared); with
``--attn-temperature-beta`` the whole query is scaled per position after RoPE (Mistral4).

DeepSeek Sparse Attention (``--experimental-attention-variant dsa``, ``core/transformer/sparse_attention.py``):
the layer's lightning indexer reads the detached hidden state and query latent (the hidden state without
``--q-lora-rank``) and picks each query's top-k keys; attention runs over those only (dense under
``--dsa-dense-warmup``). A layer that shares (``--dsa-indexer-topk-freq``) attends with its source layer's
selection, which travels with the micro-batch in ``SequenceLayout.dsa_selections``. In training with
``--dsa-indexer-loss-coeff`` the indexer's KL loss joins the loss through ``attach_aux_loss`` and is logged as
``indexer loss``. Under generation the indexer's keys are cached beside the layer's keys and values.
Under context parallelism (any ``--context-parallel-algo``: DSA has its own exchange) each rank all-gathers the
indexer's keys (``index_head_dim`` values per token, the compact exchange), selects its queries' top-k over the
whole sequence in sequence order, and fetches from their owners only the MLA latents (``kv_lora_rank`` +
rope values per token) of the keys its queries selected (``cp_mappings.fetch_rows``), which it up-projects itself;
their gradients travel back the same way. Every rank's indexer loss is its queries' share of the sequence's
mean. The dense warm-up attends with the chosen CP algorithm and gathers every key for its KL target.

Tensor parallelism: the down projections and the latent norms are replicated (their outputs are needed
whole on every rank), the up projections are column-parallel by heads and the output projection is
row-parallel. The up projections' input copy all-reduces the latents' gradients over TP and ``k_pe``'s
gradient is all-reduced explicitly, so every replicated parameter receives the whole gradient (not a partial
sum) and the layer input's gradient is complete: under sequence parallelism the input is gathered with a
backward that only splits.
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import ParallelState
from core.tensor_parallel.checkpoint import checkpoint, inside_checkpoint
from core.tensor_parallel.layers import ColumnParallelLinear, ReplicatedLinear, RowParallelLinear, Segment
from core.tensor_parallel.cp_mappings import fetch_rows
from core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region,
                                           gather_from_sequence_parallel_region)
from core.tensor_parallel.random import get_rng_tracker
from core.transformer.attention import sliding_window_mask
from core.transformer.attention_mask import attention_allowed
from core.transformer.context_parallel import SequenceLayout, attend, in_sequence_order
from core.transformer.config import TransformerConfig
from core.transformer.moe.aux_losses import DSA_INDEXER_LOSS, attach_aux_loss, track_aux_losses
from core.transformer.norms import build_norm
from core.transformer.qk_clip import local_rows, record_max_logits, unit_factors
from core.transformer.rope import apply_rope, layer_rotary
from core.transformer.sparse_attention import (KeyRule, LightningIndexer, indexer_kl_loss, indexer_rotary,
                                               select_topk, sparse_attention)


def mla_attention_flops(config: TransformerConfig, seq_length: int, layer: int) -> Tuple[float, float]:
    """Forward FLOPs per token of layer ``layer``'s MLA branch (``mindspeed_llm/training/metrics.py``'s convention:
    matrix multiplies, 2 per multiply-add): (by weights: the query path, the KV latent and its up projection, the
    output projection and gate, a selecting DSA layer's indexer; between activations: scores and context over every
    key, or under DSA the top-k (every key in the dense warm-up), and the indexer's scores over every key)."""
    h, heads = config.hidden_size, config.num_attention_heads
    nope, rope, value = config.qk_head_dim, config.qk_pos_emb_head_dim, config.v_head_dim
    q_rank, kv_rank = config.q_lora_rank, config.kv_lora_rank
    queries = 2 * h * heads * (nope + rope) if q_rank is None else 2 * h * q_rank + 2 * q_rank * heads * (nope + rope)
    latent = 2 * h * (kv_rank + rope) + 2 * kv_rank * heads * (nope + value)
    gate_width = (1 if config.attention_output_gate_per_head else value) if config.attention_output_gate else 0
    weights = queries + latent + 2 * heads * value * h + 2 * h * heads * gate_width
    keys = seq_length
    if config.is_dsa and not config.dsa_dense_warmup:
        keys = min(config.dsa_indexer_topk, seq_length)
    activations = 2 * keys * heads * (nope + rope) + 2 * keys * heads * value
    if config.is_dsa and config.computes_topk(layer):
        index_heads, index_dim = config.dsa_indexer_n_heads, config.dsa_indexer_head_dim
        weights += 2 * (q_rank or h) * index_heads * index_dim + 2 * h * index_dim + 2 * h * index_heads
        activations += 2 * seq_length * index_heads * index_dim
    return weights, activations


class DsaSelection(NamedTuple):
    """One DSA layer's keys per query: ``indices``/``valid`` [b, sq, k] into the keys ``rule`` orders (the whole
    sequence; under CP every rank's tokens in CP-rank order), and (a computing layer's) the indexer's outputs for
    its loss: q_index [sq, b, H, d], k_index [sk, b, d], weights [sq, b, H]. Under CP the keys are every rank's in
    sequence order (so that ties break as on one process), ``key_order`` [s] maps a sequence position to its row
    in CP-rank order, ``fetched`` [m] lists the selected keys this rank fetches (sorted CP-rank-order rows) and
    ``fetched_indices`` the selections as rows of those."""
    indices: torch.Tensor
    valid: torch.Tensor
    rule: KeyRule
    index: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = None
    key_order: Optional[torch.Tensor] = None
    fetched: Optional[torch.Tensor] = None
    fetched_indices: Optional[torch.Tensor] = None

    def shared(self) -> "DsaSelection":
        """What a layer reusing this selection needs (not the indexer's outputs)."""
        return self._replace(index=None)


class MultiLatentAttention(nn.Module):
    """MLA self-attention of one layer; ``forward(hidden [s(/tp), b, h], rotary) -> [s(/tp), b, h]``."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config, self.group = config, state.tp_group
        self.layer_number = layer_number  # keys this layer's entry of a generation KV cache
        heads, tp = config.num_attention_heads, self.group.size
        self.local_heads = heads // tp
        self.max_logits: Optional[torch.Tensor] = None  # --qk-clip: this step's largest logit per local head
        self.nope_dim, self.rope_dim, self.v_dim = config.qk_head_dim, config.qk_pos_emb_head_dim, config.v_head_dim
        q_head = self.nope_dim + self.rope_dim
        down_bias = config.qkv_bias
        dtype = config.params_dtype
        up_args = dict(group=self.group, bias=config.add_bias_linear, sequence_parallel=False, dtype=dtype)
        if config.q_lora_rank is None:
            self.linear_q_proj = ColumnParallelLinear(config.hidden_size, heads * q_head,
                                                      segments=(Segment(heads, q_head),), **up_args)
        else:
            self.linear_q_down_proj = ReplicatedLinear(config.hidden_size, config.q_lora_rank, down_bias, dtype)
            self.q_layernorm = self._latent_norm(config.q_lora_rank)
            self.linear_q_up_proj = ColumnParallelLinear(config.q_lora_rank, heads * q_head,
                                                         segments=(Segment(heads, q_head),), **up_args)
        self.linear_kv_down_proj = ReplicatedLinear(config.hidden_size, config.kv_lora_rank + self.rope_dim,
                                                    down_bias, dtype)
        self.kv_layernorm = self._latent_norm(config.kv_lora_rank)
        kv_head = self.nope_dim + self.v_dim
        self.linear_kv_up_proj = ColumnParallelLinear(config.kv_lora_rank, heads * kv_head,
                                                      segments=(Segment(heads, kv_head),), **up_args)
        self.linear_proj = RowParallelLinear(
            heads * self.v_dim, config.hidden_size, group=self.group,
            bias=config.dense_bias(layer_number),
            sequence_parallel=config.sequence_parallel, segments=(Segment(heads, self.v_dim),), dtype=dtype)
        # --attention-output-gate: sigmoid(W_gate x) on the attention output, one gate per value channel or, with
        # --attention-output-gate-per-head, one per head (Bailing's g_proj); column-parallel by head
        self.gate_width = (1 if config.attention_output_gate_per_head else self.v_dim) \
            if config.attention_output_gate else 0
        if self.gate_width:
            self.linear_gate = ColumnParallelLinear(config.hidden_size, heads * self.gate_width,
                                                    segments=(Segment(heads, self.gate_width),),
                                                    **{**up_args, "bias": False})
        self.window = config.layer_window(layer_number)
        self.chunk = config.layer_chunk(layer_number)
        self.use_rope = layer_number not in config.no_rope_layers
        self.dsa_source = config.dsa_topk_source(layer_number) if config.is_dsa else None
        self.indexer = None
        if config.is_dsa and self.dsa_source == layer_number:  # a computing layer (not one that shares)
            eps = config.dsa_indexer_k_norm_epsilon
            self.indexer = LightningIndexer(config.hidden_size, config.q_lora_rank or config.hidden_size,
                                            config.dsa_indexer_n_heads, config.dsa_indexer_head_dim, self.rope_dim,
                                            eps if eps is not None else config.norm_epsilon,
                                            config.dsa_indexer_rope_interleaved, dtype)
        self.tracked_aux_losses: Dict[str, torch.Tensor] = {}  # the indexer loss of training forwards (the log)

    def _latent_norm(self, size: int) -> nn.Module:
        cfg = self.config
        eps = cfg.mla_latent_norm_epsilon if cfg.mla_latent_norm_epsilon is not None else cfg.norm_epsilon
        return build_norm(cfg.normalization, size, eps, grad_partial_over_tp=False,
                          dtype=cfg.params_dtype, offset=cfg.apply_layernorm_1p, bias=cfg.layernorm_bias,
                          fused=cfg.use_fused_rmsnorm)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under sequence parallelism); its gradient below is whole per rank
        if self.config.sequence_parallel:
            hidden = gather_from_sequence_parallel_region(hidden, self.group, output_grad_is_partial=False)
        s, b = hidden.shape[:2]
        nq = self.local_heads
        if self.config.q_lora_rank is None:
            q_latent = hidden  # what the DSA indexer reads
            q = self.linear_q_proj(hidden)  # [s, b, np * (nope + rope)]
        else:
            q_latent = self.q_layernorm(self.linear_q_down_proj(hidden))  # [s, b, q_lora_rank]
            q = self.linear_q_up_proj(q_latent)
        q = q.view(s, b, nq, self.nope_dim + self.rope_dim)
        q_nope, q_pe = q.split([self.nope_dim, self.rope_dim], dim=-1)
        latent = self.linear_kv_down_proj(hidden)  # [s, b, kv_lora_rank + rope]
        compressed, k_pe = latent.split([self.config.kv_lora_rank, self.rope_dim], dim=-1)
        k_pe = copy_to_tensor_model_parallel_region(k_pe, self.group)  # local heads' gradients summed over TP
        normed = self.kv_layernorm(compressed)  # [s, b, kv_lora_rank]
        k_pe = k_pe.unsqueeze(2)  # [s, b, 1, rope]
        rotary = layer_rotary(rotary, self.window is not None)
        query_scale = None
        if rotary is not None and self.use_rope:
            cos, sin, *query_scale = rotary  # query_scale [s, b|1, 1, 1] with --attn-temperature-beta
            interleaved = self.config.rope_interleaved
            fused = self.config.use_fused_rotary_pos_emb
            q_pe = apply_rope(q_pe, cos, sin, interleaved, fused)
            k_pe = apply_rope(k_pe, cos, sin, interleaved, fused)
        q = torch.cat([q_nope, q_pe], dim=-1)  # [s, b, np, nope + rope]
        if query_scale:
            q = q * query_scale[0]  # Llama-4 attention temperature on the whole query (Mistral4)
        selection = None
        if self.dsa_source is not None:
            selection = self._dsa_select(hidden, q_latent, rotary, layout)
        latents = (normed, k_pe)
        if selection is not None and selection.fetched is not None:  # DSA under CP: the selected keys' latents
            latents = self._fetch_latents(normed, k_pe, selection.fetched, layout)  # [m, b, ...]
        k, v = self._keys_and_values(*latents)  # [sk, b, np, nope + rope], [sk, b, np, v]
        if layout is not None and layout.cache is not None:  # generation: attend over every cached key
            k, v = layout.cache.update(self.layer_number, k, v)  # [sk, b, np, nope + rope | v]
        if self._recompute_core_attention():
            context = checkpoint(self._core_attention, q, k, v, layout, selection)  # [s, b, np * v]
        else:
            context = self._core_attention(q, k, v, layout, selection)
        if self.gate_width:  # gate [s, b, np * (v | 1)], its sigmoid in fp32 as transformers'
            gate = torch.sigmoid(self.linear_gate(hidden).float()).to(context.dtype)
            context = (context.view(s, b, nq, self.v_dim) * gate.view(s, b, nq, self.gate_width)).flatten(2)
        output = self.linear_proj(context)  # [s, b, h] ([s/tp, b, h] under SP)
        if selection is not None and selection.index is not None and self._trains_indexer():
            output = attach_aux_loss(output, self._indexer_loss(q, k, selection, (normed, k_pe), layout))
        return output

    def qk_clip_rows(self, eta_heads: torch.Tensor, alpha: float) -> List[Tuple[nn.Parameter, torch.Tensor]]:
        """--qk-clip: TP-local row factors from each head's eta [heads]: the query projection's no-rope rows times
        eta^alpha and rope rows times eta (the rope key is shared by the heads), the KV up projection's key rows
        times eta^(1 - alpha), values untouched."""
        query = self.linear_q_proj if self.config.q_lora_rank is None else self.linear_q_up_proj
        q_full = unit_factors(eta_heads, [(self.nope_dim, alpha), (self.rope_dim, 1.0)])
        kv_full = unit_factors(eta_heads, [(self.nope_dim, 1.0 - alpha), (self.v_dim, 0.0)])
        tp = self.group
        return [(param, local_rows(full, param, tp.rank, tp.size))
                for linear, full in ((query, q_full), (self.linear_kv_up_proj, kv_full))
                for param in (linear.weight, linear.bias) if param is not None]

    def _keys_and_values(self, normed: torch.Tensor, k_pe: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each head's key and value from the normed kv latent [sk, b, r] and the rotated rope key [sk, b, 1, rope]:
        k [sk, b, np, nope + rope], v [sk, b, np, v]."""
        sk, b, nq = normed.size(0), normed.size(1), self.local_heads
        kv = self.linear_kv_up_proj(normed).view(sk, b, nq, self.nope_dim + self.v_dim)
        k_nope, v = kv.split([self.nope_dim, self.v_dim], dim=-1)  # [sk, b, np, nope], [sk, b, np, v]
        return torch.cat([k_nope, k_pe.expand(sk, b, nq, self.rope_dim)], dim=-1), v

    # ---- DeepSeek Sparse Attention -------------------------------------------------------------------------

    def _trains_indexer(self) -> bool:
        """A training forward with an indexer loss: computed (and logged) even without grad, as in the first pass
        of full recompute, whose recomputation then attaches it."""
        return self.config.dsa_indexer_loss_coeff > 0 and self.training

    def _dsa_select(self, hidden: torch.Tensor, q_latent: torch.Tensor, rotary: Optional[tuple],
                    layout: Optional[SequenceLayout]) -> DsaSelection:
        """This layer's keys per query: its indexer's top-k, or (a sharing layer) its source layer's."""
        if self.indexer is None:
            if layout is None or self.dsa_source not in layout.dsa_selections:
                raise RuntimeError(f"DSA layer {self.layer_number} reuses layer {self.dsa_source}'s top-k, which did "
                                   "not run before it in this forward")
            return layout.dsa_selections[self.dsa_source]
        cfg = self.config
        cos, sin = layer_rotary(rotary, False)[:2]
        cos, sin = indexer_rotary(cos, sin, cfg.rope_interleaved, cfg.dsa_indexer_rope_interleaved)
        with contextlib.nullcontext() if self._trains_indexer() else torch.no_grad():  # detached inputs: indexer only
            q_index, k_index, weights = self.indexer(hidden.detach(), q_latent.detach(), cos, sin)
        k_index, rule, key_order = self._selectable_keys(k_index, layout)
        indices, valid = select_topk(q_index, k_index, weights, cfg.dsa_indexer_topk, rule)
        selection = DsaSelection(indices, valid, rule, (q_index, k_index, weights), key_order)
        if key_order is not None and not cfg.dsa_dense_warmup:
            rows = key_order[indices]  # [b, sq, k] CP-rank-order rows of the selected keys
            fetched = torch.unique(rows[valid])  # [m] sorted: the keys this rank's queries attend to
            rows = torch.searchsorted(fetched, rows).clamp_(max=fetched.numel() - 1)  # (invalid ones masked)
            selection = selection._replace(fetched=fetched, fetched_indices=rows)
        if layout is not None:
            layout.dsa_selections[self.layer_number] = selection.shared()
        return selection

    def _selectable_keys(self, k_index: torch.Tensor, layout: Optional[SequenceLayout]
                         ) -> Tuple[torch.Tensor, KeyRule, Optional[torch.Tensor]]:
        """The indexer keys the queries select from (the cached ones in generation; every CP rank's, gathered, in
        sequence order), the rule of which they may select, and under CP the CP-rank-order row of each position."""
        if layout is None:
            return k_index, KeyRule(), None
        if layout.cache is not None:
            return (layout.cache.update_rows(self.layer_number, "index_keys", k_index),  # [sk, b, d]
                    KeyRule(mask=layout.cache.allowed(None, None)), None)
        if layout.cp is None:
            return k_index, KeyRule(layout.positions, layout.positions, layout.documents), None
        key_order = torch.argsort(layout.cp.all_positions(layout.seq_len, k_index.device))  # [s]
        every = gather_from_sequence_parallel_region(k_index, layout.cp.group)  # [s, b, d]: the compact exchange
        return every.index_select(0, key_order), KeyRule(layout.positions, None, layout.documents), key_order

    def _fetch_latents(self, normed: torch.Tensor, k_pe: torch.Tensor, fetched: torch.Tensor,
                       layout: SequenceLayout) -> Tuple[torch.Tensor, torch.Tensor]:
        """DSA under CP: the normed kv latents [m, b, r] and rotated rope keys [m, b, 1, rope] of the ``fetched``
        keys, from the CP ranks that hold them (only those rows travel; each rank up-projects them itself)."""
        return self._latents_of(fetch_rows(self._latent_rows(normed, k_pe), fetched, layout.cp.group))

    @staticmethod
    def _latent_rows(normed: torch.Tensor, k_pe: torch.Tensor) -> torch.Tensor:
        """One row per token, [s, b, r + rope]: what DSA's CP exchanges of a key."""
        return torch.cat([normed, k_pe.squeeze(2)], dim=-1)

    def _latents_of(self, rows: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The inverse of :meth:`_latent_rows`: (normed [m, b, r], k_pe [m, b, 1, rope])."""
        normed, k_pe = rows.split([self.config.kv_lora_rank, self.rope_dim], dim=-1)
        return normed, k_pe.unsqueeze(2)

    def _indexer_loss(self, q: torch.Tensor, k: torch.Tensor, selection: DsaSelection,
                      latents: Tuple[torch.Tensor, torch.Tensor], layout: Optional[SequenceLayout]) -> torch.Tensor:
        """The indexer's KL loss times --dsa-indexer-loss-coeff (dense under --dsa-dense-warmup), tracked. Under CP
        each rank's loss is its queries' share of the sequence's mean (the gradient reduction over CP adds them):
        the sparse loss over the fetched keys, the dense one over every rank's keys (gathered without grad)."""
        cfg = self.config
        scale = cfg.mla_softmax_scale or q.size(-1) ** -0.5
        q_index, k_index, weights = selection.index
        indices, sparse = selection.indices, cfg.dsa_indexer_use_sparse_loss
        cp = layout.cp if layout is not None else None
        if cp is not None and sparse:  # k holds the fetched keys: index them, and the indexer's keys, as rows
            positions = cp.all_positions(layout.seq_len, k.device).index_select(0, selection.fetched)  # [m]
            k_index, indices = k_index.index_select(0, positions), selection.fetched_indices
        elif cp is not None:
            with torch.no_grad():
                rows = in_sequence_order(self._latent_rows(*latents).detach(), 0, cp, layout.seq_len)  # [s, b, ...]
                k = self._keys_and_values(*self._latents_of(rows))[0]
        loss = indexer_kl_loss(q, k, q_index, k_index, weights, scale, indices, selection.valid, sparse=sparse,
                               rule=selection.rule, group=self.group) * cfg.dsa_indexer_loss_coeff
        if cp is not None:  # this rank's share of the mean over the whole sequence's queries (the log sums them)
            loss = loss / cp.group.size
        track_aux_losses(self.tracked_aux_losses, {DSA_INDEXER_LOSS: loss})
        return loss

    def _recompute_core_attention(self) -> bool:
        return (self.config.recompute_granularity == "selective" and self.training and torch.is_grad_enabled()
                and not inside_checkpoint())

    def _core_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        layout: Optional[SequenceLayout] = None,
                        selection: Optional[DsaSelection] = None) -> torch.Tensor:
        """q/k [s, b, np, nope + rope], v [s, b, np, v] -> [s, b, np * v] (across CP ranks / within documents
        as ``layout`` says; over ``selection``'s keys under DSA); in generation k/v are the cache's [sk, ...]."""
        s, b = q.shape[:2]
        if selection is not None and not self.config.dsa_dense_warmup:
            scale = self.config.mla_softmax_scale or q.size(-1) ** -0.5
            dropout = self.config.attention_dropout if self.training else 0.0
            indices = selection.indices if selection.fetched is None else selection.fetched_indices
            with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():  # heads differ per rank
                out = sparse_attention(q, k, v, indices, selection.valid, scale, dropout=dropout)
        elif layout is None:
            out = self._local_attention(q, k, v)
        elif layout.cache is not None:  # generation: k/v are every cached slot's (the forward updated the cache)
            out = self._local_attention(q, k, v, layout.positions, layout.cache.key_slots(),
                                        allowed=layout.cache.allowed(self.window, self.chunk))
        else:
            scale = self.config.mla_softmax_scale or q.size(-1) ** -0.5
            out = attend(q, k, v, layout, self._local_attention, scale, self.window, self.chunk)
        return out.reshape(s, b, -1)

    def _local_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         query_positions: Optional[torch.Tensor] = None, key_positions: Optional[torch.Tensor] = None,
                         documents: Optional[torch.Tensor] = None, first_head: int = 0,
                         allowed: Optional[torch.Tensor] = None) -> torch.Tensor:
        """q [sq, b, n, d], k/v [sk, b, n, d|v] -> [sq, b, n, v]; positions None: one whole causal sequence.
        ``allowed`` [b, 1, sq, sk]: a given boolean mask (a KV cache's) instead of the positions' rule."""
        sq = q.size(0)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, np, s, dim]
        dropout = self.config.attention_dropout if self.training else 0.0
        with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():  # heads differ per rank
            if query_positions is None:
                mask = sliding_window_mask(sq, self.window, q.device, self.chunk)
            elif allowed is not None:
                mask = allowed
            else:
                mask = attention_allowed(query_positions, key_positions, self.window, self.chunk, documents)
            if self.config.qk_clip and self.training:
                scale = self.config.mla_softmax_scale or q.size(-1) ** -0.5
                record_max_logits(self, q, k, mask, scale, first_head)
            causal = dict(is_causal=True) if mask is None else dict(attn_mask=mask)
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=self.config.mla_softmax_scale,
                                                 **causal)  # [b, np, s, v]
        return out.permute(2, 0, 1, 3)  # [s, b, np, v]
