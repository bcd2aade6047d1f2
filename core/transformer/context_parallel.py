"""Context parallelism: the sequence of every sample split over the CP ranks, attention joined across them.

Each CP rank holds ``s / CP`` tokens of every sample (the trainer cuts the micro-batch,
:func:`split_batch`) and runs the whole model on them; only attention needs the other ranks' tokens (the
exchanges are named functions in ``core/tensor_parallel/cp_mappings.py``). ``--context-parallel-algo`` picks how:

- ``megatron_cp_algo`` (ring, the default): K/V blocks travel around the CP ring (batched isend/irecv);
  each step's partial attention is merged into the running output by log-sum-exp, in fp32
  (:func:`merge_attention`). The backward sends K/V around again with their gradients travelling
  with them, so every rank's dK/dV arrives back at its owner. With ``--attention-mask-type causal`` the
  sequence is cut into ``2 CP`` chunks and rank ``i`` holds chunks ``i`` and ``2 CP - 1 - i``, so every rank
  does the same work; blocks a query cannot see are skipped. ``--use-cp-send-recv-overlap`` posts the
  next block's exchange before computing the current one.
- ``ulysses_cp_algo``: an all-to-all turns sequence-sharded q/k/v into head-sharded ones over the whole
  sequence, attention runs as on one process, and a second all-to-all turns it back. KV heads that do not
  split over the CP ranks are repeated to the query heads first (always with
  ``--kv-head-repeat-before-uly-alltoall``).
- ``hybrid_cp_algo``: Ulysses inside groups of ``--ulysses-degree-in-cp`` neighbouring CP ranks, the ring
  across them.
- ``kvallgather_cp_algo``: every rank all-gathers the full K/V (its backward reduce-scatters their
  gradients) and attends with its own queries; any mask works (sliding windows, chunks, ALiBi, MLA).

Positions: :func:`token_positions` says which tokens a rank holds; RoPE, learned positions and every mask
use them (``core/transformer/attention_mask.py``), so a CP rank computes exactly what one process computes
for those tokens. Documents (``--reset-attention-mask``, packed SFT data) reach every algorithm as the
document number of each token of the full sequence.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from core.parallel_state import Group, ParallelState
from core.tensor_parallel.cp_mappings import RingExchange, heads_to_sequence, sequence_to_heads
from core.tensor_parallel.mappings import all_gather_along_dim, gather_from_sequence_parallel_region
from core.transformer.attention_mask import attention_allowed
from core.transformer.config import TransformerConfig

RING, ULYSSES, HYBRID, KV_ALLGATHER = "megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo", "kvallgather_cp_algo"
CP_ALGORITHMS = (RING, ULYSSES, HYBRID, KV_ALLGATHER)
ATTENTION_MASK_TYPES = ("causal", "general")


def ulysses_degree(algo: str, cp: int, ulysses_degree_in_cp: Optional[int]) -> int:
    """How many neighbouring CP ranks exchange heads by all-to-all: all of them for Ulysses, the given
    degree for the hybrid, none (1) for the ring and the K/V all-gather."""
    if algo == ULYSSES:
        return cp
    if algo == HYBRID:
        return ulysses_degree_in_cp or 1
    return 1


def load_balanced(algo: str, attention_mask_type: str) -> bool:
    """Whether the ring's causal load balancing cuts the sequence (chunks ``i`` and ``2R - 1 - i``)."""
    return algo in (RING, HYBRID) and attention_mask_type == "causal"


def sequence_divisor(cp: int, algo: str, attention_mask_type: str, ulysses: int) -> int:
    """The number the sequence length must divide by: ``2 CP`` under load balancing, else ``CP``."""
    return 2 * cp if load_balanced(algo, attention_mask_type) and cp // ulysses > 1 else cp


def token_positions(seq_len: int, ring_size: int, ring_rank: int, ulysses_size: int = 1, ulysses_rank: int = 0,
                    balanced: bool = True, device: Optional[torch.device] = None) -> torch.Tensor:
    """The sequence indices ``[s / (R U)]`` of the tokens one CP rank holds.

    Ring rank ``r`` of ``R`` holds chunks ``r`` and ``2R - 1 - r`` of ``2R`` (``balanced``) or the ``r``-th
    of ``R`` contiguous parts; Ulysses rank ``u`` of ``U`` holds the ``u``-th contiguous part of that.
    """
    if balanced and ring_size > 1:
        chunk = seq_len // (2 * ring_size)
        first, second = ring_rank * chunk, (2 * ring_size - 1 - ring_rank) * chunk
        ring_part = torch.cat([torch.arange(first, first + chunk), torch.arange(second, second + chunk)])
    else:
        part = seq_len // ring_size
        ring_part = torch.arange(ring_rank * part, (ring_rank + 1) * part)
    mine = ring_part.view(ulysses_size, -1)[ulysses_rank]
    return mine.to(device) if device is not None else mine


@dataclass(frozen=True)
class ContextParallel:
    """The CP algorithm and groups attention uses (``algo`` one of :data:`CP_ALGORITHMS`)."""

    algo: str
    group: Group  # every CP rank
    ring: Group  # the ranks K/V travel around (the CP group without Ulysses)
    ulysses: Group  # the ranks that exchange heads (a single rank without Ulysses)
    balanced: bool = True
    overlap: bool = False
    repeat_kv: bool = False

    def ring_positions(self, seq_len: int, ring_rank: int, device: torch.device) -> torch.Tensor:
        """The positions ``[s / R]`` ring rank ``ring_rank`` holds after the Ulysses all-to-all."""
        return token_positions(seq_len, self.ring.size, ring_rank, balanced=self.balanced, device=device)

    def rank_positions(self, seq_len: int, cp_rank: int, device: torch.device) -> torch.Tensor:
        """The positions ``[s / CP]`` CP rank ``cp_rank`` holds."""
        u = self.ulysses.size
        return token_positions(seq_len, self.ring.size, cp_rank // u, u, cp_rank % u, self.balanced, device)

    def all_positions(self, seq_len: int, device: torch.device) -> torch.Tensor:
        """Every CP rank's positions in CP-rank order ``[s]`` (the order of an all-gather over CP)."""
        return torch.cat([self.rank_positions(seq_len, c, device) for c in range(self.group.size)])


def context_parallel_for(config: TransformerConfig, state: ParallelState) -> Optional[ContextParallel]:
    """The model's CP algorithm and groups, or None without context parallelism."""
    if state.cp == 1:
        return None
    return ContextParallel(config.context_parallel_algo, state.group("cp"), state.group("cp_ring"),
                           state.group("cp_ulysses"),
                           load_balanced(config.context_parallel_algo, config.attention_mask_type),
                           config.cp_send_recv_overlap, config.kv_head_repeat_before_uly_alltoall)


@dataclass
class SequenceLayout:
    """Where this rank's tokens sit in the sequence and which of them may attend to which."""

    seq_len: int  # the full sequence
    positions: torch.Tensor  # [s_local] the sequence index of each token this rank holds
    documents: Optional[torch.Tensor] = None  # [b, s] document number of every token of the full sequence
    cp: Optional[ContextParallel] = None
    # generation: a KV cache (mindspeed_llm/inference/kv_cache.py) that attention layers write this step's
    # keys/values into and attend over; ``positions`` are then this step's cache slots
    cache: Optional[Any] = None
    # DeepSeek Sparse Attention: each computing layer's (indices, valid, rule) of this forward, for the layers
    # that share its top-k (core/transformer/mla.py)
    dsa_selections: Dict[int, Any] = field(default_factory=dict)
    # the micro-batch's token ids [b, s_local], read by hash-routed MoE layers (--moe-hash-layers)
    token_ids: Optional[torch.Tensor] = None


def sequence_layout(cp: Optional[ContextParallel], local_len: int, device: torch.device,
                    document_ids: Optional[torch.Tensor] = None) -> Optional[SequenceLayout]:
    """The layout of a micro-batch whose ranks hold ``local_len`` tokens each (and ``document_ids``
    [b, local_len] of them); None for plain causal attention over the whole sequence on one rank."""
    if cp is None:
        if document_ids is None:
            return None
        return SequenceLayout(local_len, torch.arange(local_len, device=device), document_ids)
    seq_len = local_len * cp.group.size
    # every rank's document numbers [b, s], in sequence order
    documents = None if document_ids is None else in_sequence_order(document_ids, 1, cp, seq_len)
    return SequenceLayout(seq_len, cp.rank_positions(seq_len, cp.group.rank, device), documents, cp)


def in_sequence_order(local: torch.Tensor, dim: int, cp: ContextParallel, seq_len: int) -> torch.Tensor:
    """Every CP rank's ``local`` (this rank's tokens along ``dim``) gathered and put in sequence order: the
    tensor one process would hold, ``seq_len`` long along ``dim``. Data only (no gradient flows back)."""
    gathered = all_gather_along_dim(local.contiguous(), dim, cp.group)  # CP-rank order along dim
    ordered = torch.empty_like(gathered)
    ordered.index_copy_(dim, cp.all_positions(seq_len, local.device), gathered)
    return ordered


def split_batch(batch: Dict[str, torch.Tensor], cp: ContextParallel) -> Dict[str, torch.Tensor]:
    """This CP rank's tokens of every ``[b, s, ...]`` tensor of a micro-batch (dim 1 is the sequence)."""
    result = {}
    for name, value in batch.items():
        if value.dim() < 2:
            result[name] = value
            continue
        positions = cp.rank_positions(value.size(1), cp.group.rank, value.device)
        result[name] = value.index_select(1, positions)
    return result


# ---------------------------------------------------------------------------------------- the log-sum-exp merge
def _finite(lse: torch.Tensor) -> torch.Tensor:
    """``lse`` with ``-inf`` (rows that saw no key) as 0, so ``exp(x - lse)`` stays 0 instead of NaN."""
    return lse.masked_fill(torch.isinf(lse), 0.0)


def merge_attention(out: torch.Tensor, lse: torch.Tensor, block_out: torch.Tensor,
                    block_lse: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention over two key sets from each set's normalised output ``[..., s, d]`` and
    log-sum-exp ``[..., s]``: ``(out e^lse + block_out e^block_lse) / (e^lse + e^block_lse)``, in fp32."""
    merged = torch.logaddexp(lse, block_lse)
    base = _finite(merged)
    out = out * torch.exp(lse - base)[..., None] + block_out * torch.exp(block_lse - base)[..., None]
    return out, merged


def block_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: Optional[torch.Tensor],
                    scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Attention of fp32 ``q`` [b, n, sq, d] over one block of keys ``k`` [b, n, sk, d] / ``v`` [b, n, sk, dv]:
    the normalised output [b, n, sq, dv] and the log-sum-exp of the scores [b, n, sq] (``-inf`` for a row
    that may see none of them)."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale  # [b, n, sq, sk]
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.matmul(torch.exp(scores - _finite(lse)[..., None]), v), lse


def block_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: Optional[torch.Tensor],
                             scale: float, grad_out: torch.Tensor, lse: torch.Tensor,
                             delta: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients (fp32) of one block for queries whose attention over ALL keys had log-sum-exp ``lse``
    [b, n, sq] and ``delta`` = rowsum(dO * O) [b, n, sq]: ``(dq, dk, dv)``."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.exp(scores - _finite(lse)[..., None])  # [b, n, sq, sk]: this block's share of each row
    grad_v = torch.matmul(probs.transpose(-1, -2), grad_out)
    grad_scores = probs * (torch.matmul(grad_out, v.transpose(-1, -2)) - delta[..., None])
    grad_q = torch.matmul(grad_scores, k) * scale
    grad_k = torch.matmul(grad_scores.transpose(-1, -2), q) * scale
    return grad_q, grad_k, grad_v


# ---------------------------------------------------------------------------------------- ring attention
@dataclass(frozen=True)
class RingSpec:
    """What ring attention needs besides q/k/v: who holds which tokens, and the mask rule."""

    cp: ContextParallel
    seq_len: int
    scale: float
    window: Optional[int] = None
    chunk: Optional[int] = None
    documents: Optional[torch.Tensor] = None  # [b, s]


def _halves(length: int) -> List[slice]:
    """The sub-blocks a rank's tokens are cut into (the two load-balanced chunks; one block if odd)."""
    if length % 2:
        return [slice(0, length)]
    return [slice(0, length // 2), slice(length // 2, length)]


def _block_masks(spec: RingSpec, query_positions: torch.Tensor,
                 key_positions: torch.Tensor) -> List[Tuple[slice, slice, Optional[torch.Tensor]]]:
    """(query rows, key rows, mask) of the sub-blocks that have something to attend; mask None = all of it."""
    blocks = []
    for rows in _halves(query_positions.numel()):
        for cols in _halves(key_positions.numel()):
            allowed = attention_allowed(query_positions[rows], key_positions[cols], spec.window, spec.chunk,
                                        spec.documents)
            if not bool(allowed.any()):
                continue
            blocks.append((rows, cols, None if bool(allowed.all()) else allowed))
    return blocks


def _repeat_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    return x if x.size(1) == heads else x.repeat_interleave(heads // x.size(1), dim=1)


def _sum_heads(grad: torch.Tensor, heads: int) -> torch.Tensor:
    """The gradient of :func:`_repeat_heads`: [b, n, s, d] summed back to [b, heads, s, d]."""
    if grad.size(1) == heads:
        return grad
    b, n, s, d = grad.shape
    return grad.view(b, heads, n // heads, s, d).sum(dim=2)


class _RingAttention(torch.autograd.Function):
    """Causal attention of this rank's queries over every ring rank's keys; q [b, n, S, d], k/v [b, nkv, S, d|dv]."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: RingSpec) -> torch.Tensor:
        ring, heads = spec.cp.ring, q.size(1)
        exchange = RingExchange(ring)
        query_positions = spec.cp.ring_positions(spec.seq_len, ring.rank, q.device)
        qf = q.float()
        out = qf.new_zeros(q.shape[:-1] + (v.size(-1),))  # [b, n, S, dv]
        lse = qf.new_full(q.shape[:-1], float("-inf"))  # [b, n, S]
        current = [k, v]
        for step in range(ring.size):
            pending = exchange.start(current, tag=0) if step < ring.size - 1 else None
            if pending is not None and not spec.cp.overlap:  # the exchange before the compute
                exchange.wait(pending[1])
            source = (ring.rank - step) % ring.size
            key_positions = spec.cp.ring_positions(spec.seq_len, source, q.device)
            kf, vf = (_repeat_heads(t.float(), heads) for t in current)
            for rows, cols, allowed in _block_masks(spec, query_positions, key_positions):
                block_out, block_lse = block_attention(qf[:, :, rows], kf[:, :, cols], vf[:, :, cols], allowed,
                                                       spec.scale)
                out[:, :, rows], lse[:, :, rows] = merge_attention(out[:, :, rows], lse[:, :, rows], block_out,
                                                                   block_lse)
            if pending is not None:
                if spec.cp.overlap:  # the exchange ran during the compute
                    exchange.wait(pending[1])
                current = pending[0]
        result = out.to(q.dtype)
        ctx.spec = spec
        ctx.save_for_backward(q, k, v, result, lse)
        return result

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        spec: RingSpec = ctx.spec
        ring, heads = spec.cp.ring, q.size(1)
        exchange = RingExchange(ring)
        query_positions = spec.cp.ring_positions(spec.seq_len, ring.rank, q.device)
        qf, grad_out = q.float(), grad_out.float()
        delta = (grad_out * out.float()).sum(dim=-1)  # [b, n, S]
        grad_q = torch.zeros_like(qf)
        current = [k, v]
        grad_kv = [torch.zeros_like(k, dtype=torch.float32), torch.zeros_like(v, dtype=torch.float32)]
        for step in range(ring.size):
            pending = exchange.start(current, tag=0) if step < ring.size - 1 else None
            if pending is not None and not spec.cp.overlap:  # the exchange before the compute
                exchange.wait(pending[1])
            source = (ring.rank - step) % ring.size
            key_positions = spec.cp.ring_positions(spec.seq_len, source, q.device)
            kf, vf = (_repeat_heads(t.float(), heads) for t in current)
            grad_k, grad_v = torch.zeros_like(kf), torch.zeros_like(vf)
            for rows, cols, allowed in _block_masks(spec, query_positions, key_positions):
                dq, dk, dv = block_attention_backward(qf[:, :, rows], kf[:, :, cols], vf[:, :, cols], allowed,
                                                      spec.scale, grad_out[:, :, rows], lse[:, :, rows],
                                                      delta[:, :, rows])
                grad_q[:, :, rows] += dq
                grad_k[:, :, cols] += dk
                grad_v[:, :, cols] += dv
            grad_kv[0] += _sum_heads(grad_k, current[0].size(1))
            grad_kv[1] += _sum_heads(grad_v, current[1].size(1))
            # the K/V gradients follow the K/V to the next rank; after the last step they reach their owner
            received, requests = exchange.start(grad_kv, tag=2)
            exchange.wait(requests)
            grad_kv = received
            if pending is not None:
                if spec.cp.overlap:  # the exchange ran during the compute
                    exchange.wait(pending[1])
                current = pending[0]
        return grad_q.to(q.dtype), grad_kv[0].to(k.dtype), grad_kv[1].to(v.dtype), None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: RingSpec) -> torch.Tensor:
    """Ring attention (see the module docstring); q [b, n, S, d], k/v [b, nkv, S, d|dv] -> [b, n, S, dv]."""
    return _RingAttention.apply(q, k, v, spec)


# ---------------------------------------------------------------------------------------- dispatch
# local_attention(q, k, v, query_positions, key_positions, documents, first_head) -> [s, b, n, dv], with q
# [sq, b, n, d] and k/v [sk, b, nkv, d|dv]; first_head: the index among this rank's heads of q's first head
LocalAttention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                           Optional[torch.Tensor], int], torch.Tensor]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: SequenceLayout,
           local_attention: LocalAttention, scale: float, window: Optional[int] = None,
           chunk: Optional[int] = None) -> torch.Tensor:
    """Attention of this rank's tokens under ``layout``: q [s, b, n, d], k/v [s, b, nkv, d|dv] -> [s, b, n, dv].

    Without CP (documents only) and after the Ulysses all-to-all without a ring, ``local_attention`` does
    the work (positions None: the whole sequence in order, plain causal); the ring runs :func:`ring_attention` (causal masks, windows, chunks and documents only).
    """
    cp = layout.cp
    if cp is None:
        return local_attention(q, k, v, layout.positions, layout.positions, layout.documents, 0)
    if cp.algo == KV_ALLGATHER:  # every key, in CP-rank order; the backward reduce-scatters their gradients
        k, v = (gather_from_sequence_parallel_region(t, cp.group) for t in (k, v))
        keys = cp.all_positions(layout.seq_len, q.device)
        return local_attention(q, k, v, layout.positions, keys, layout.documents, 0)
    first_head = 0
    if cp.ulysses.size > 1:
        if cp.repeat_kv or k.size(2) % cp.ulysses.size:
            k, v = (t.repeat_interleave(q.size(2) // t.size(2), dim=2) for t in (k, v))
        q, k, v = (sequence_to_heads(t, cp.ulysses) for t in (q, k, v))
        first_head = cp.ulysses.rank * q.size(2)
    positions = cp.ring_positions(layout.seq_len, cp.ring.rank, q.device)
    if cp.ring.size > 1:
        spec = RingSpec(cp, layout.seq_len, scale, window, chunk, layout.documents)
        q, k, v = (t.permute(1, 2, 0, 3) for t in (q, k, v))  # [b, heads, s, d]
        out = ring_attention(q, k, v, spec).permute(2, 0, 1, 3)  # [s, b, n, dv]
    elif layout.documents is None:  # the whole sequence in order: plain causal (no mask to build and save)
        out = local_attention(q, k, v, None, None, None, first_head)
    else:
        out = local_attention(q, k, v, positions, positions, layout.documents, first_head)
    return heads_to_sequence(out, cp.ulysses)
