"""DeepSeek-V4's attention (``--compressed-attention-pattern``): a sliding window plus compressed entries.

Every layer attends with one key/value head shared by all query heads (the key is the value). Queries come from a
latent: ``q = norm_head(W_q_up norm(W_q_down x))`` (an unweighted RMS norm per head); the key/value is
``norm(W_kv x)``. RoPE rotates the *trailing* ``rope_dims`` of each head (interleaved pairs in DeepSeek-V4), and
the attention output's rope dims are rotated back by the query's angle, so each value enters by its relative
distance. The softmax has a learned sink logit per head. The layer's kind is its pattern letter:

* ``S``: the ``--sliding-window`` of recent tokens only (RoPE table of ``--local-rotary-base`` when given);
* ``H`` (HCA): the window plus every compressed entry the query may see. A :class:`Compressor` pools each
  window of ``--hca-compress-ratio`` tokens into one entry: a softmax over the window's tokens of the gate
  ``W_gate x + position_bias`` weighs their ``W_kv x``, then an RMS norm and RoPE at the window's first position;
* ``C`` (CSA): entries of ``--csa-compress-ratio`` tokens whose windows overlap (entry w pools the first half of
  the projections of window w - 1 with the second half of window w's), and of those only the top-k
  (``--dsa-indexer-topk``) that a lightning indexer picks per query: its own overlapping compressor at
  ``--dsa-indexer-head-dim``, its queries from the query latent, scores ``sum_h w_h relu(q_h . k)``.
  Its picks are discrete, so the LM loss never reaches it (as in transformers); with ``--dsa-indexer-loss-coeff``
  it learns, as DeepSeek-V3.2's indexer, the KL divergence from the main attention's distribution over the
  entries (summed over heads, normalised) to its softmax, over every visible entry or, with
  ``--dsa-indexer-use-sparse-loss``, over its picks; its inputs are detached. The loss is logged as ``indexer loss``.

Query t may see entry w once the entry's window has ended: ``w < (t + 1) // ratio``. Windows are counted in
positions, so a left-padded generation row compresses its own tokens. The output projection is grouped: the
``--o-groups`` groups of heads are each projected to ``--o-lora-rank`` (one block-diagonal product), and those
are mixed to the hidden size.

Tensor parallelism: heads (and so groups and sinks) split over TP; the down projections, the key/value, the
compressors and the indexer are replicated, and the keys' copy into the heads all-reduces their gradient, so
every replicated weight gets its whole gradient (under sequence parallelism the input is gathered first, as in
MLA). Generation keeps each token's compressor projections in the KV cache and pools them again each step.

Context parallelism (any ``--context-parallel-algo``: the layer has its own exchange): each rank keeps its queries
and fetches from their owners only the keys of its query chunks' windows (``cp_mappings.fetch_rows``: the window's
halo, not an all-gather). Compressed entries: when every run of a rank's positions starts and ends on a window
boundary (the usual case: CP chunks of s / 2CP tokens and a ratio that divides them), each rank pools the entries
of its own windows (a CSA run's first one with the previous window's rows fetched) and one all-gather of the
entries (``dim`` values per window) gives every rank all of them; otherwise each rank's softmax numerator and
denominator of every entry, shifted by the group's maximum, are summed over CP. The indexer scores its queries
against every entry; its loss is each rank's share of the sequence's mean.
Attention runs in blocks of queries (``DEFAULT_BLOCK``), each under checkpointing: a block reads the band of keys its
windows reach, an HCA layer's visible entries and a CSA layer's picks gathered per query, with one softmax over
them and the sinks (:func:`sink_attention`); the CSA indexer scores a block against every entry. Memory grows
linearly in the sequence (``O(s (window + block + s / ratio))`` for HCA, ``O(s (window + block + k))`` for CSA, plus
the indexer's block of scores); generation attends whole (a step is a few queries). Packed documents are refused (a
window would pool across documents).
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, NamedTuple, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from core.parallel_state import Group, ParallelState
from core.tensor_parallel.layers import ColumnParallelLinear, ReplicatedLinear, RowParallelLinear, Segment, mark_param
from core.tensor_parallel.cp_mappings import fetch_rows
from core.tensor_parallel.mappings import (all_reduce, copy_to_tensor_model_parallel_region,
                                           gather_from_sequence_parallel_region,
                                           sum_partials_over_tensor_model_parallel_region)
from core.tensor_parallel.param_meta import TPShard
from core.tensor_parallel.random import get_rng_tracker
from core.transformer.attention_mask import attention_allowed
from core.transformer.config import CSA_LETTER, SLIDING_LETTER, TransformerConfig
from core.transformer.context_parallel import ContextParallel, SequenceLayout
from core.transformer.moe.aux_losses import DSA_INDEXER_LOSS, attach_aux_loss, track_aux_losses
from core.transformer.norms import NonParametricNorm, build_norm
from core.transformer.rope import RotaryEmbedding, apply_rope, layer_rotary
from core.transformer.sparse_attention import DEFAULT_BLOCK, gather_rows, head_summed_target, kl_rows


def rotate_trailing(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool,
                    inverse: bool = False) -> torch.Tensor:
    """RoPE on the last ``rd = cos.size(-1)`` dims of ``x`` [s, b, heads, d] (cos/sin [s, b|1, 1, rd]); the leading
    dims pass. ``inverse``: rotate by minus the angle."""
    rd = cos.size(-1)
    rotated = apply_rope(x[..., -rd:], cos, -sin if inverse else sin, interleaved)
    return torch.cat([x[..., :-rd], rotated], dim=-1)


def compressed_attention_flops(config: TransformerConfig, seq_length: int, layer: int,
                               kind: Optional[str] = None) -> Tuple[float, float]:
    """Forward FLOPs per token of layer ``layer`` (``mindspeed_llm/training/metrics.py``'s convention: matrix
    multiplies, 2 per multiply-add): (by weights: the query latent and its up projection, the shared key/value head,
    the grouped output projection, the compressor's and the indexer's projections; between activations: the scores
    and context over the window and the entries a query reads -- every one of an HCA layer's, the top-k of a CSA
    layer's -- and the indexer's scores over every entry). ``2 h r + 2 r q + 2 h d + 2 q d_o + 2 G d_o h`` +
    ``2 h (kv + gate rows)`` [+ the indexer's], and ``4 q (min(window, s) + keys)`` [+ ``2 H_I d_I s / m``]."""
    h, d, heads = config.hidden_size, config.kv_channels, config.num_attention_heads
    q, rank, groups = heads * d, config.q_lora_rank, config.o_groups
    weights = 2 * h * rank + 2 * rank * q + 2 * h * d + 2 * q * config.o_lora_rank + 2 * groups * config.o_lora_rank * h
    keys = min(config.sliding_window, seq_length)
    kind = kind or config.compressed_layer_kind(layer)  # ``kind``: an MTP module's layer's letter
    ratio = config.compress_ratio(layer, kind)
    activations = 0.0
    if ratio:
        entries = seq_length // ratio
        overlap = kind == CSA_LETTER
        weights += 2 * h * 2 * d * (2 if overlap else 1)  # kv and gate rows
        keys += min(config.dsa_indexer_topk, entries) if overlap else entries
        if overlap:  # the indexer: its compressor, queries, head weights; its scores over every entry
            index_heads, index_dim = config.dsa_indexer_n_heads, config.dsa_indexer_head_dim
            weights += 2 * h * 2 * 2 * index_dim + 2 * rank * index_heads * index_dim + 2 * h * index_heads
            activations += 2 * index_heads * index_dim * entries
    return weights, activations + 4 * keys * q


class TokenPlaces(NamedTuple):
    """Where the keys and queries of one forward sit: key ``positions``/``valid`` [b, sk] (False: padding), the
    queries' ``query_positions`` [b, sq], the sequence's ``length`` (one past its last position: the entries span
    it) and, under context parallelism, the ``cp`` whose ranks hold the other keys."""
    positions: torch.Tensor
    valid: torch.Tensor
    query_positions: torch.Tensor
    length: int
    cp: Optional[ContextParallel] = None

    @property
    def group(self) -> Optional[Group]:
        """The CP group (None without context parallelism)."""
        return self.cp.group if self.cp is not None else None


def cp_row_order(cp: ContextParallel, seq_len: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(order, row_of)`` ``[s]``: the sequence position of each CP-rank-order row (an all-gather's order), and the
    row of each position (its inverse)."""
    order = cp.all_positions(seq_len, device)
    return order, torch.argsort(order)


def aligned_runs(positions: torch.Tensor, ratio: int) -> Optional[List[Tuple[int, int]]]:
    """The maximal runs of consecutive ``positions`` ``[(start, length)]`` (in their order) when every one starts
    and ends on a window boundary, else None."""
    values = positions.tolist()
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[i - 1] + 1:
            runs.append((values[start], i - start))
            start = i
    return runs if all(first % ratio == 0 and length % ratio == 0 for first, length in runs) else None


def own_windows(places: TokenPlaces, ratio: int) -> Optional[List[Tuple[int, int]]]:
    """Under CP: this rank's runs of positions when every rank's runs are aligned to windows of ``ratio`` (so that
    all ranks take the same path), else None."""
    cp = places.cp
    runs = [aligned_runs(cp.rank_positions(places.length, rank, torch.device("cpu")), ratio)
            for rank in range(cp.group.size)]
    return runs[cp.group.rank] if all(run is not None for run in runs) else None


def entry_visible(query_positions: torch.Tensor, entries: int, ratio: int) -> torch.Tensor:
    """``[b, sq, W]``: query at position t sees entry w once its window has ended, ``w < (t + 1) // ratio``."""
    ready = torch.div(query_positions + 1, ratio, rounding_mode="floor")  # [b, sq]
    return torch.arange(entries, device=query_positions.device) < ready.unsqueeze(-1)


def with_previous_window(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """CSA's overlap: ``[b, W, ratio, ...]`` halves -> ``[b, W, 2 ratio, ...]``, window w - 1's ``first`` then window
    w's ``second`` (zeros / False before window 0)."""
    previous = torch.cat([torch.zeros_like(first[:, :1]), first[:, :-1]], dim=1)
    return torch.cat([previous, second], dim=2)


class Compressor(nn.Module):
    """Pools each window of ``ratio`` tokens into one entry of ``dim`` values (replicated over TP).

    ``overlap`` (CSA): the projections are ``2 dim`` wide; entry w pools the first half of window w - 1's with
    the second half of window w's, ``2 ratio`` tokens in all."""

    def __init__(self, config: TransformerConfig, dim: int, ratio: int, overlap: bool) -> None:
        super().__init__()
        self.dim, self.ratio, self.overlap = dim, ratio, overlap
        width = 2 * dim if overlap else dim
        dtype = config.params_dtype
        self.linear_kv = ReplicatedLinear(config.hidden_size, width, False, dtype)
        self.linear_gate = ReplicatedLinear(config.hidden_size, width, False, dtype)
        self.position_bias = mark_param(nn.Parameter(torch.empty(ratio, width, dtype=dtype)), init="zeros")
        self.kv_layernorm = build_norm("RMSNorm", dim, config.norm_epsilon, grad_partial_over_tp=False, dtype=dtype)

    def rows(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each token's ``[kv; gate]`` projections ``[s, b, 2 width]`` (what generation caches)."""
        return torch.cat([self.linear_kv(hidden), self.linear_gate(hidden)], dim=-1)

    def pool(self, rows: torch.Tensor, places: TokenPlaces, entries: int, group: Optional[Group] = None
             ) -> torch.Tensor:
        """Entries ``[entries, b, dim]`` (normed, not rotated) of the tokens' ``rows`` [sk, b, 2 width] at their
        places. Windows missing tokens give finite entries no query may see yet. ``group``: context parallelism,
        each rank holding some of the tokens: the softmax pooling's numerator and denominator are summed over it
        (shifted by the group's maximum), so every rank gets every entry."""
        sk, b, _ = rows.shape
        ratio = self.ratio
        slots = entries * ratio
        index = torch.where(places.valid, places.positions, slots)  # [b, sk]: padding to a dropped extra slot
        placed = rows.new_zeros(b, slots + 1, rows.size(-1)).scatter(
            1, index.unsqueeze(-1).expand(b, sk, rows.size(-1)), rows.transpose(0, 1))[:, :slots]
        filled = torch.zeros(b, slots + 1, dtype=torch.bool, device=rows.device).scatter(
            1, index, places.valid)[:, :slots].view(b, entries, ratio)
        kv, gate = placed.view(b, entries, ratio, -1).chunk(2, dim=-1)  # [b, W, ratio, width] each
        logits = gate + self.position_bias
        if self.overlap:  # entry w: first halves of window w - 1, second halves of window w
            dim = self.dim
            kv = with_previous_window(kv[..., :dim], kv[..., dim:])
            logits = with_previous_window(logits[..., :dim], logits[..., dim:])
            filled = with_previous_window(filled, filled)
        logits = logits.float().masked_fill(~filled.unsqueeze(-1), float("-inf"))  # [b, W, slots, dim]
        with torch.no_grad():  # the shift cancels in the ratio: no gradient through it
            shift = logits.amax(dim=2, keepdim=True)
            if group is not None and group.size > 1:
                shift = all_reduce(shift, group, dist.ReduceOp.MAX)
            shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # windows no rank fills
        weights = torch.exp(logits - shift)  # [b, W, slots, dim], 0 where not filled
        numerator, denominator = (kv.float() * weights).sum(dim=2), weights.sum(dim=2)  # [b, W, dim]
        if group is not None and group.size > 1:  # each rank's tokens' share, every rank's entries
            numerator = sum_partials_over_tensor_model_parallel_region(numerator, group)
            denominator = sum_partials_over_tensor_model_parallel_region(denominator, group)
        pooled = (numerator / denominator.clamp_min(torch.finfo(torch.float32).tiny)).to(rows.dtype)
        return self.kv_layernorm(pooled).transpose(0, 1)  # [W, b, dim]


class CompressedIndexer(nn.Module):
    """CSA's lightning indexer: its own overlapping compressor at ``head_dim`` and per-head queries from the
    query latent; picks each query's top-k entries (replicated over TP, no gradient)."""

    def __init__(self, config: TransformerConfig, ratio: int) -> None:
        super().__init__()
        self.heads, self.head_dim, self.topk = (config.dsa_indexer_n_heads, config.dsa_indexer_head_dim,
                                                config.dsa_indexer_topk)
        dtype = config.params_dtype
        self.compressor = Compressor(config, self.head_dim, ratio, overlap=True)
        self.linear_q_up_proj = ReplicatedLinear(config.q_lora_rank, self.heads * self.head_dim, False, dtype)
        self.linear_weights_proj = ReplicatedLinear(config.hidden_size, self.heads, False, dtype)

    def scores(self, hidden: torch.Tensor, q_latent: torch.Tensor, keys: torch.Tensor, cos: torch.Tensor,
               sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
        """``[b, sq, W]`` fp32: ``sum_h w_h relu(q_h . k) / sqrt(d)`` of each query and entry; ``keys`` [W, b, d]
        rotated, cos/sin the queries' angles."""
        s, b = hidden.shape[:2]
        q = self.linear_q_up_proj(q_latent).view(s, b, self.heads, self.head_dim)
        q = rotate_trailing(q, cos, sin, interleaved)  # [s, b, H, d]
        scores = torch.relu(torch.einsum("sbhd,wbd->bshw", q.float(), keys.float())) * self.head_dim ** -0.5
        weights = self.linear_weights_proj(hidden).float() * self.heads ** -0.5  # [s, b, H]
        return torch.einsum("bshw,sbh->bsw", scores, weights)

    @torch.no_grad()
    def pick(self, scores: torch.Tensor, visible: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Each query's top-k of its visible entries: (indices, valid) ``[b, sq, k]``, ``k = min(topk, W)``; ``valid``
        is False where a query sees fewer than k entries (its index there points at an entry it may not see)."""
        picked = scores.masked_fill(~visible, float("-inf")).topk(min(self.topk, scores.size(-1)), dim=-1).indices
        return picked, visible.gather(-1, picked)

    def select(self, scores: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """Boolean ``[b, sq, W]``: each query's top-k of its visible entries (:meth:`pick` as a mask)."""
        picked, valid = self.pick(scores, visible)
        return torch.zeros_like(visible).scatter(-1, picked, valid)


def entry_kl_sum(q: torch.Tensor, entries: torch.Tensor, scores: torch.Tensor, allowed: torch.Tensor, scale: float,
                 group: Optional[Group]) -> torch.Tensor:
    """The sum over queries of KL(the main attention over the ``allowed`` entries, summed over all heads and
    normalised || softmax of the indexer's ``scores``): q [s, b, np, d] and entries [W, b, d] (detached here),
    scores/allowed [b, s, W]. Queries that see no entry add nothing."""
    rows = allowed | ~allowed.any(dim=-1, keepdim=True)  # no all-masked softmax (those rows' terms are dropped)
    with torch.no_grad():
        logits = torch.einsum("sbnd,wbd->bnsw", q.detach().float(), entries.detach().float()) * scale
        target = head_summed_target(logits, rows, group)  # [b, s, W]
    predicted = scores.masked_fill(~rows, float("-inf")).log_softmax(dim=-1)
    return kl_rows(target, predicted, allowed)


def sink_attention(q: torch.Tensor, shared: torch.Tensor, shared_allowed: torch.Tensor, sinks: torch.Tensor,
                   scale: float, dropout: float, own: Optional[torch.Tensor] = None,
                   own_valid: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Softmax attention with a sink logit per head over keys that are also the values: q [sq, b, np, d] over the
    ``shared`` keys [sk, b, d] every query may read (``shared_allowed`` [b|1, sq, sk]) and, for CSA's picks, each
    query's ``own`` keys [b, sq, k, d] (``own_valid`` [b, sq, k]), one softmax over both -> [sq, b, np, d]. Scores
    in q's dtype, the softmax in fp32 (as ``explicit_attention``); ``dropout`` on the probabilities."""
    qh = q.permute(1, 2, 0, 3)  # [b, np, sq, d]
    keys = shared.permute(1, 0, 2).unsqueeze(1)  # [b, 1, sk, d]
    logits = [torch.matmul(qh, keys.transpose(-1, -2)).mul(scale).masked_fill(~shared_allowed.unsqueeze(1),
                                                                             float("-inf"))]  # [b, np, sq, sk]
    if own is not None:  # [b, np, sq, k]
        logits.append(torch.einsum("bnqd,bqkd->bnqk", qh, own).mul(scale).masked_fill(~own_valid.unsqueeze(1),
                                                                                      float("-inf")))
    b, heads, sq, _ = logits[0].shape
    logits.append(sinks.to(logits[0].dtype).view(1, heads, 1, 1).expand(b, heads, sq, 1))
    probs = torch.softmax(torch.cat(logits, dim=-1), dim=-1, dtype=torch.float32)[..., :-1].to(q.dtype)
    if dropout > 0:
        probs = F.dropout(probs, dropout, training=True)
    width = keys.size(2)
    out = torch.matmul(probs[..., :width], keys)  # [b, np, sq, d]
    if own is not None:
        out = out + torch.einsum("bnqk,bqkd->bnqd", probs[..., width:], own)
    return out.permute(2, 0, 1, 3)


class Band(NamedTuple):
    """A block of queries (rows ``start`` .. ``stop``) and the keys its windows may reach (rows ``lo`` .. ``hi`` of
    the keys sorted by position)."""
    start: int
    stop: int
    lo: int
    hi: int


def window_bands(queries: torch.Tensor, key_positions: torch.Tensor, window: Optional[int],
                 block: int) -> List[Band]:
    """Blocks of ``block`` queries (positions ``queries`` [sq]) with the range of ``key_positions`` [sk] (ascending)
    their windows reach: from the block's first position minus ``window - 1`` (0 without a window) to its last."""
    starts = list(range(0, queries.numel(), block))
    firsts = torch.stack([queries[start:start + block].min() for start in starts])
    lasts = torch.stack([queries[start:start + block].max() for start in starts])
    reach = firsts - window + 1 if window is not None else torch.zeros_like(firsts)
    lows = torch.searchsorted(key_positions, reach).tolist()
    highs = torch.searchsorted(key_positions, lasts, right=True).tolist()
    return [Band(start, min(start + block, queries.numel()), lo, hi)
            for start, lo, hi in zip(starts, lows, highs)]


class CompressedAttention(nn.Module):
    """DeepSeek-V4's attention of one layer: ``[s(/tp), b, h]`` in and out (see the module docstring)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0,
                 kind: Optional[str] = None) -> None:
        # kind: the layer's letter when not the pattern's (an MTP module's layer: TransformerConfig.mtp_attention_kind)
        super().__init__()
        self.config, self.group, self.layer_number = config, state.tp_group, layer_number
        tp, heads, dim, dtype = self.group.size, config.num_attention_heads, config.kv_channels, config.params_dtype
        self.local_heads, self.head_dim = heads // tp, dim
        self.kind = kind or config.compressed_layer_kind(layer_number)
        self.window = config.layer_window(layer_number)
        self.linear_q_down_proj = ReplicatedLinear(config.hidden_size, config.q_lora_rank, False, dtype)
        self.q_layernorm = build_norm("RMSNorm", config.q_lora_rank, config.norm_epsilon, grad_partial_over_tp=False,
                                      dtype=dtype)
        self.linear_q_up_proj = ColumnParallelLinear(config.q_lora_rank, heads * dim, group=self.group, bias=False,
                                                     sequence_parallel=False, segments=(Segment(heads, dim),),
                                                     dtype=dtype)
        self.q_head_norm = NonParametricNorm("RMSNorm", config.norm_epsilon)
        self.linear_kv_proj = ReplicatedLinear(config.hidden_size, dim, False, dtype)
        self.kv_layernorm = build_norm("RMSNorm", dim, config.norm_epsilon, grad_partial_over_tp=False, dtype=dtype)
        self.sinks = mark_param(nn.Parameter(torch.empty(self.local_heads, dtype=dtype)), init="zeros",
                                tp_shard=TPShard(0, (Segment(heads, 1),)))
        groups, rank = config.o_groups, config.o_lora_rank
        self.local_groups, self.group_width = groups // tp, heads * dim // groups
        self.o_group_proj = mark_param(  # block-diagonal: group g's [rank, heads * dim / groups]
            nn.Parameter(torch.empty(self.local_groups * rank, self.group_width, dtype=dtype)), init="normal",
            tp_shard=TPShard(0, (Segment(groups, rank),)))
        self.linear_proj = RowParallelLinear(groups * rank, config.hidden_size, group=self.group, bias=False,
                                             sequence_parallel=config.sequence_parallel,
                                             segments=(Segment(groups, rank),), dtype=dtype)
        ratio = config.compress_ratio(layer_number, self.kind)
        self.compressor = Compressor(config, dim, ratio, overlap=self.kind == CSA_LETTER) if ratio else None
        self.indexer = CompressedIndexer(config, ratio) if self.kind == CSA_LETTER else None
        self.entry_rotary = RotaryEmbedding(config) if ratio else None  # the entries' angles (the global table)
        self.tracked_aux_losses: Dict[str, torch.Tensor] = {}  # the indexer loss of training forwards (the log)
        self.block = DEFAULT_BLOCK  # queries per block of the attention (_blocked)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under SP); its gradient below is whole per rank
        cfg = self.config
        if cfg.sequence_parallel:
            hidden = gather_from_sequence_parallel_region(hidden, self.group, output_grad_is_partial=False)
        s, b = hidden.shape[:2]
        cache = layout.cache if layout is not None else None
        places = self._places(layout, s, b, hidden.device)
        cos, sin = layer_rotary(rotary, self.kind == SLIDING_LETTER)[:2]
        interleaved = cfg.rope_interleaved
        q_latent = self.q_layernorm(self.linear_q_down_proj(hidden))  # [s, b, q_lora_rank]
        q = self.q_head_norm(self.linear_q_up_proj(q_latent).view(s, b, self.local_heads, self.head_dim))
        q = rotate_trailing(q, cos, sin, interleaved)  # [s, b, np, d]
        kv = self.kv_layernorm(self.linear_kv_proj(hidden)).unsqueeze(2)  # [s, b, 1, d]
        kv = rotate_trailing(kv, cos, sin, interleaved)
        loss = None
        if cache is not None:  # generation: every cached slot, attended by the cache's mask
            context = self._generation_step(q, kv, hidden, q_latent, cos, sin, places, cache)
        else:  # training and scoring: blocks of queries over their windows' keys and their entries
            context, loss = self._blocked(q, kv, hidden, q_latent, cos, sin, places)
        context = rotate_trailing(context, cos, sin, interleaved, inverse=True)
        grouped = torch.bmm(context.reshape(s * b, self.local_groups, self.group_width).transpose(0, 1),
                            self.o_group_proj.view(self.local_groups, -1, self.group_width).transpose(1, 2))
        output = self.linear_proj(grouped.transpose(0, 1).reshape(s, b, -1))  # [s, b, h] ([s/tp, b, h] under SP)
        if loss is not None:
            output = attach_aux_loss(output, self._indexer_loss(loss, s * b, places.group))
        return output

    def _generation_step(self, q: torch.Tensor, kv: torch.Tensor, hidden: torch.Tensor, q_latent: torch.Tensor,
                         cos: torch.Tensor, sin: torch.Tensor, places: TokenPlaces, cache: object) -> torch.Tensor:
        """Generation: this step's queries over every cached slot (the cache's mask) and every entry they see (a
        CSA layer's picks); a step is a few tokens (or the prompt), so the scores are built whole."""
        keys = cache.update(self.layer_number, kv, kv)[0].squeeze(2)  # [sk, b, d]
        allowed = cache.allowed(self.window, None).squeeze(1)  # [b, sq, sk]
        if self.compressor is not None:  # entries [W, b, d], seen [b, sq, W]
            entries = self._pooled(self.compressor, "compressor", hidden, places, cache)
            seen = entry_visible(places.query_positions, entries.size(0), self.compressor.ratio)
            if self.indexer is not None:
                with torch.no_grad():
                    index_keys = self._pooled(self.indexer.compressor, "indexer", hidden, places, cache)
                    scores = self.indexer.scores(hidden, q_latent, index_keys, cos, sin, self.config.rope_interleaved)
                seen = self.indexer.select(scores, seen)
            keys, allowed = torch.cat([keys, entries]), torch.cat([allowed, seen], dim=-1)
        return self._attend(q, copy_to_tensor_model_parallel_region(keys, self.group), allowed)

    def _blocked(self, q: torch.Tensor, kv: torch.Tensor, hidden: torch.Tensor, q_latent: torch.Tensor,
                 cos: torch.Tensor, sin: torch.Tensor, places: TokenPlaces
                 ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The attention of every query, ``block`` queries at a time, each block under checkpointing: its window's
        keys (a band of the keys sorted by position), an HCA layer's visible entries, a CSA layer's picks (the
        indexer scores the block against every entry). Memory ``O(s (window + block + entries))`` for HCA and
        ``O(s (window + block + k))`` for CSA, not ``O(s^2)``. Returns the context [s, b, np, d] and, when the indexer
        trains, its KL loss summed over the queries."""
        keys, key_positions = kv.squeeze(2), places.positions[0]  # [s, b, d] at positions 0 .. s - 1
        if places.group is not None:  # context parallelism: the windows' keys, fetched from their ranks
            keys, key_positions = self._window_keys(keys, places)
        keys = copy_to_tensor_model_parallel_region(keys, self.group)  # the local heads' gradients summed over TP
        entries = index_keys = None
        if self.compressor is not None:
            entries = copy_to_tensor_model_parallel_region(
                self._pooled(self.compressor, "compressor", hidden, places, None), self.group)  # [W, b, d]
        trains_indexer = self.indexer is not None and self._trains_indexer()
        if self.indexer is not None:
            with contextlib.nullcontext() if trains_indexer else torch.no_grad():  # detached inputs
                index_keys = self._pooled(self.indexer.compressor, "indexer", hidden.detach(), places, None)
        queries = places.query_positions[0]  # [s], alike in every row
        dropout = self.config.attention_dropout if self.training else 0.0
        needs_grad = torch.is_grad_enabled() and (q.requires_grad or trains_indexer)
        contexts, loss = [], None
        with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():  # heads differ per TP rank
            for band in window_bands(queries, key_positions, self.window, self.block):
                rows = slice(band.start, band.stop)
                args = (q[rows], keys[band.lo:band.hi], key_positions[band.lo:band.hi], queries[rows], entries,
                        index_keys, hidden[rows].detach(), q_latent[rows].detach(), cos[rows], sin[rows], dropout)
                context, kl = (checkpoint(self._attend_block, *args, use_reentrant=False) if needs_grad
                               else self._attend_block(*args))
                contexts.append(context)
                if kl is not None:
                    loss = kl if loss is None else loss + kl
        return torch.cat(contexts), loss

    def _attend_block(self, q: torch.Tensor, keys: torch.Tensor, key_positions: torch.Tensor, queries: torch.Tensor,
                      entries: Optional[torch.Tensor], index_keys: Optional[torch.Tensor], hidden: torch.Tensor,
                      q_latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dropout: float
                      ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """One block of queries q [B, b, np, d] at ``queries`` [B] over its band of ``keys`` [L, b, d] (at
        ``key_positions`` [L]) and the entries [W, b, d]: (context [B, b, np, d], the indexer's KL sum or None)."""
        b = q.size(1)
        allowed = attention_allowed(queries, key_positions, self.window).unsqueeze(0)  # [1, B, L]
        own = own_valid = kl = None
        if entries is not None:
            seen = entry_visible(queries.expand(b, -1), entries.size(0), self.compressor.ratio)  # [b, B, W]
            if self.indexer is None:  # HCA: every entry the block's queries see
                keys, allowed = torch.cat([keys, entries]), torch.cat([allowed.expand(b, -1, -1), seen], dim=-1)
            else:  # CSA: each query's top-k entries by the indexer
                with contextlib.nullcontext() if self._trains_indexer() else torch.no_grad():
                    scores = self.indexer.scores(hidden, q_latent, index_keys, cos, sin,
                                                 self.config.rope_interleaved)  # [b, B, W]
                picked, own_valid = self.indexer.pick(scores, seen)  # [b, B, k]
                own = gather_rows(entries.transpose(0, 1), picked)  # [b, B, k, d]
                if self._trains_indexer():
                    over = (torch.zeros_like(seen).scatter(-1, picked, own_valid)
                            if self.config.dsa_indexer_use_sparse_loss else seen)
                    kl = entry_kl_sum(q, entries, scores, over, self._scale(), self.group)
        context = sink_attention(q, keys, allowed, self.sinks, self._scale(), dropout, own, own_valid)
        return context, kl

    def _places(self, layout: Optional[SequenceLayout], s: int, b: int, device: torch.device) -> TokenPlaces:
        """Key and query positions: the cache's (generation), this CP rank's, else 0 .. s - 1 for every row."""
        if layout is not None and layout.cache is not None:
            cache = layout.cache
            end = cache.length + cache.step_len
            positions = cache.positions[:, :end]
            return TokenPlaces(positions, cache.valid[:, :end], cache.positions[:, cache.length:end],
                               int(positions.max().item()) + 1)
        if layout is not None and layout.documents is not None:
            raise ValueError("DeepSeek-V4's compressed attention does not take packed documents (--reset-attention-"
                             "mask, packed SFT samples) yet: its windows would pool across documents")
        if layout is not None and layout.cp is not None:  # this rank's tokens, scattered over the sequence
            positions = layout.positions.expand(b, s)
            return TokenPlaces(positions, torch.ones(b, s, dtype=torch.bool, device=device), positions,
                               layout.seq_len, layout.cp)
        positions = torch.arange(s, device=device).expand(b, s)
        return TokenPlaces(positions, torch.ones(b, s, dtype=torch.bool, device=device), positions, s)

    def _window_keys(self, kv: torch.Tensor, places: TokenPlaces) -> Tuple[torch.Tensor, torch.Tensor]:
        """Under CP: the keys of this rank's queries' windows ``[m, b, d]`` (only those rows travel, from the ranks
        that hold them), sorted by their positions ``[m]``."""
        cp, queries = places.cp, places.query_positions[0]  # [sq] sequence positions (alike in every row)
        order, row_of = cp_row_order(cp, places.length, kv.device)
        needed = torch.zeros(places.length, dtype=torch.bool, device=kv.device)  # positions some window reaches
        reach = torch.arange(self.window, device=kv.device) if self.window is not None else None
        if reach is None:
            needed[:int(queries.max()) + 1] = True
        else:
            needed[(queries[:, None] - reach[None, :]).clamp_min(0).flatten()] = True
        wanted = torch.sort(row_of[needed]).values  # [m] CP-rank-order rows
        keys = fetch_rows(kv, wanted, cp.group)  # [m, b, d]
        positions, by_position = torch.sort(order[wanted])
        return keys.index_select(0, by_position), positions

    def _trains_indexer(self) -> bool:
        """A training forward with an indexer loss (--dsa-indexer-loss-coeff)."""
        return self.config.dsa_indexer_loss_coeff > 0 and self.training

    def _scale(self) -> float:
        cfg = self.config
        return cfg.attention_scale if cfg.attention_scale is not None else self.head_dim ** -0.5

    def _indexer_loss(self, kl_sum: torch.Tensor, queries: int, cp: Optional[Group]) -> torch.Tensor:
        """The CSA indexer's KL loss (the mean over the ``queries`` rows of ``kl_sum``) times
        --dsa-indexer-loss-coeff, tracked for the log (``cp``: the CP group)."""
        loss = kl_sum / queries * self.config.dsa_indexer_loss_coeff
        if cp is not None:  # this rank's queries' share of the sequence's mean (the log sums the shares)
            loss = loss / cp.size
        track_aux_losses(self.tracked_aux_losses, {DSA_INDEXER_LOSS: loss})
        return loss

    def _pooled(self, compressor: Compressor, name: str, hidden: torch.Tensor, places: TokenPlaces,
                cache: Optional[object]) -> torch.Tensor:
        """``compressor``'s entries over every key (the cached rows too), rotated at their windows' first
        positions."""
        rows = compressor.rows(hidden)  # [s, b, 2 width]
        if cache is not None:
            rows = cache.update_rows(self.layer_number, name, rows)  # [sk, b, 2 width]
        count = -(-places.length // compressor.ratio)  # entries spanning the sequence
        runs = own_windows(places, compressor.ratio) if places.cp is not None else None
        if runs is not None:  # CP, every window on one rank: each pools its own, one all-gather of the entries
            entries = self._gathered_entries(compressor, rows, runs, places)
        else:  # one process, a cache, or CP with windows split over ranks: every rank's share summed over CP
            entries = compressor.pool(rows, places, count, places.group)  # [W, b, dim]
        starts = torch.arange(entries.size(0), device=entries.device)[:, None] * compressor.ratio  # [W, 1]
        cos, sin = self.entry_rotary.at(starts, entries.dtype)
        return rotate_trailing(entries.unsqueeze(2), cos, sin, self.config.rope_interleaved).squeeze(2)

    def _gathered_entries(self, compressor: Compressor, rows: torch.Tensor, runs: List[Tuple[int, int]],
                          places: TokenPlaces) -> torch.Tensor:
        """Under CP with this rank's runs of positions aligned to windows: the entries of its own windows (a CSA
        run's first entry with the previous window's rows fetched from their rank), all-gathered over CP and put
        in sequence order ``[W, b, dim]``."""
        cp, ratio = places.cp, compressor.ratio
        prefixes = self._previous_windows(rows, runs, places, ratio) if compressor.overlap else {}
        own, offset = [], 0
        for start, length in runs:
            part, base = rows[offset:offset + length], start
            if start in prefixes:
                part, base = torch.cat([prefixes[start], part]), start - ratio
            elif None in prefixes:  # a rank that fetched nothing still joins the fetch's backward
                part = torch.cat([prefixes.pop(None), part])
            positions = torch.arange(part.size(0), device=rows.device).expand(rows.size(1), -1)  # from ``base``
            local = TokenPlaces(positions, torch.ones_like(positions, dtype=torch.bool), positions, part.size(0))
            own.append(compressor.pool(part, local, part.size(0) // ratio)[(start - base) // ratio:])
            offset += length
        gathered = gather_from_sequence_parallel_region(torch.cat(own), cp.group)  # [W, b, dim] in CP-rank order
        windows = cp.all_positions(places.length, rows.device)
        windows = windows[windows % ratio == 0] // ratio  # each gathered entry's window, CP-rank order
        return gathered.index_select(0, torch.argsort(windows))

    @staticmethod
    def _previous_windows(rows: torch.Tensor, runs: List[Tuple[int, int]], places: TokenPlaces,
                          ratio: int) -> Dict[Optional[int], torch.Tensor]:
        """CSA's overlap under CP: for each run not at the sequence start, the rows ``[ratio, b, 2 width]`` of the
        window before it, fetched from the rank that holds them (by run start); a rank with none gets the empty
        fetch under the key None (its backward is a collective every rank must join)."""
        starts = [start for start, _ in runs if start > 0]
        order, row_of = cp_row_order(places.cp, places.length, rows.device)
        wanted = torch.cat([torch.arange(start - ratio, start, device=rows.device) for start in starts]) if starts \
            else order.new_zeros(0)
        sorted_rows, back = torch.sort(row_of[wanted])
        fetched = fetch_rows(rows, sorted_rows, places.group)  # [m, b, 2 width], sorted by row
        fetched = fetched.index_select(0, torch.argsort(back))  # in ``wanted`` order
        if not starts:  # nothing fetched: an empty tensor still ties this rank into the collective's backward
            return {None: fetched}
        return {start: fetched[i * ratio:(i + 1) * ratio] for i, start in enumerate(starts)}

    def _attend(self, q: torch.Tensor, keys: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Softmax attention with the sinks, whole: q [s, b, np, d] over keys = values [sk, b, d] -> [s, b, np, d]."""
        dropout = self.config.attention_dropout if self.training else 0.0
        with get_rng_tracker().fork() if dropout > 0 else contextlib.nullcontext():  # heads differ per TP rank
            return sink_attention(q, keys, allowed, self.sinks, self._scale(), dropout)
