"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5): the lightning indexer, each query's top-k keys,
attention over those keys only, and the indexer's KL loss.

**The lightning indexer** scores every allowed (query ``t``, key ``j``) pair with a few small heads::

    I[t, j] = sum_h w[t, h] * relu(scale * q_I[t, h] . k_I[j])          scale = d_I^-1/2

``q_I`` (``[H, d_I]`` per token) is projected from MLA's query latent, ``k_I`` (one ``d_I`` vector per token, shared
by the heads) from the hidden state through a LayerNorm, and ``w`` (``[H]`` per token, times ``H^-1/2``) from the
hidden state; both carry RoPE on their first rope channels, half-split (DeepSeek-V3.2) or on pairs (2i, 2i + 1)
(GLM-5), whatever MLA's own layout (:func:`indexer_rotary`). DeepSeek's kernels rotate q and k by a Hadamard
transform and score in FP8; the transform is orthogonal, so ``q . k`` is unchanged, and FP8 is a precision
choice: neither is reproduced.

**Which keys a query may select** (:class:`KeyRule`): the causal ones (by sequence index), within its document
with packed sequences, or a given mask (a generation KV cache's, with its padding).

**Selection** (:func:`select_topk`): each query keeps the ``top_k`` allowed keys of highest ``I`` (all of them
when it has fewer). The scores are built a block of queries at a time (``[b, block, sk]``) and only the indices
kept, so the selection needs ``O(s k)`` memory besides one block's scores.

**Sparse attention** (:func:`sparse_attention`): ``softmax(scale q k_sel^T) v_sel`` over the selected keys, per
head. A block of queries gathers the key and value rows of its selections (``[b, block, k, heads, d]``), or, when
the selection is a large share of the keys, scores the block against all of them in one GEMM and masks (the
cheaper of the two on memory traffic), under activation checkpointing: the forward holds one block's tensors and
the backward keeps only the indices and the block's inputs, so the memory kept grows as ``s k``, not ``s^2``. :func:`dense_masked_attention` is
the reference: full scores masked to the same selections.

**The indexer loss** (:func:`indexer_kl_loss`, DeepSeek-V3.2 section 2.1, Megatron-core's reduction): the target
is the main attention's distribution summed over all heads (TP ranks hold some each: summed over the group) and
L1-normalised, ``p``; the prediction is ``softmax(I)`` over the same keys; the loss is the mean over queries of
``KL(p || softmax(I))``. Dense (the warm-up stage): over every allowed key; sparse: over the selected keys only,
computed from the selected rows alone (``O(s k)``). Both targets are detached and the indexer's inputs are
detached by the caller, so the loss trains the indexer alone. Each block of queries runs under checkpointing.

Shapes follow the decoder's: ``[s, b, heads, dim]`` in and out.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from core.parallel_state import Group
from core.tensor_parallel.layers import ReplicatedLinear
from core.tensor_parallel.mappings import all_reduce
from core.transformer.attention_mask import attention_allowed
from core.transformer.norms import LayerNorm
from core.transformer.rope import apply_rotary

DEFAULT_BLOCK = 128  # queries per block of the selection, the sparse attention and the indexer loss
KL_EPS = 1e-10  # the floor of the target's log (Megatron-core's INDEXER_LOSS_EPS)


class LightningIndexer(nn.Module):
    """DSA's indexer of one layer: ``forward(hidden [s, b, h], q_latent [s, b, r], cos, sin)`` -> (q_index
    [s, b, H, d], k_index [s, b, d], weights [s, b, H]) for :func:`select_topk`. ``wq_b`` reads MLA's normed
    query latent, ``wk`` and ``weights_proj`` the hidden state; cos/sin ``[s, b|1, 1, rope]`` in the indexer's
    layout (:func:`indexer_rotary`). Its weights are whole on every TP rank (Megatron-core's "duplicated"):
    every rank selects the same keys for its own heads."""

    def __init__(self, hidden_size: int, q_lora_rank: int, heads: int, head_dim: int, rope_dim: int,
                 norm_eps: float = 1e-6, rope_interleaved: bool = False,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        if rope_dim > head_dim:
            raise ValueError(f"the indexer's head dim {head_dim} is narrower than the rope channels {rope_dim}")
        self.heads, self.head_dim, self.rope_interleaved = heads, head_dim, rope_interleaved
        self.wq_b = ReplicatedLinear(q_lora_rank, heads * head_dim, False, dtype)
        self.wk = ReplicatedLinear(hidden_size, head_dim, False, dtype)
        self.k_norm = LayerNorm(head_dim, norm_eps, dtype=dtype)
        self.weights_proj = ReplicatedLinear(hidden_size, heads, False, dtype)

    def forward(self, hidden: torch.Tensor, q_latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s, b = hidden.shape[:2]
        rotate = self.rope_interleaved
        q_index = apply_rotary(self.wq_b(q_latent).view(s, b, self.heads, self.head_dim), cos, sin, rotate)
        k_index = apply_rotary(self.k_norm(self.wk(hidden)).unsqueeze(2), cos, sin, rotate).squeeze(2)  # [s, b, d]
        weights = self.weights_proj(hidden) * self.heads ** -0.5  # [s, b, H]
        return q_index, k_index, weights


def indexer_rotary(cos: torch.Tensor, sin: torch.Tensor, model_interleaved: bool, indexer_interleaved: bool
                   ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The model's rotary tables ``[s, b|1, 1, rd]`` in the indexer's layout: angle i on dims (i, i + rd/2)
    (half-split) or on (2i, 2i + 1) (interleaved: each angle twice in a row)."""
    if model_interleaved == indexer_interleaved:
        return cos, sin
    if model_interleaved:  # -> half-split
        return tuple(torch.cat([t[..., 0::2], t[..., 0::2]], dim=-1) for t in (cos, sin))
    return tuple(t[..., :t.size(-1) // 2].repeat_interleave(2, dim=-1) for t in (cos, sin))


@dataclass
class KeyRule:
    """Which keys each query may select. ``mask`` [b, 1, sq, sk] (True = allowed): a given one (a KV cache's);
    else causal by ``query_positions`` [sq] / ``key_positions`` [sk] (sequence indices; None: 0 .. s - 1) and,
    with ``documents`` [b, s], within each query's document."""

    query_positions: Optional[torch.Tensor] = None
    key_positions: Optional[torch.Tensor] = None
    documents: Optional[torch.Tensor] = None
    mask: Optional[torch.Tensor] = None

    def block(self, start: int, stop: int, keys: int, device: torch.device) -> torch.Tensor:
        """Allowed keys of queries ``start .. stop - 1``: ``[b|1, stop - start, keys]`` bool."""
        if self.mask is not None:
            return self.mask[:, 0, start:stop]
        queries = self.query_positions if self.query_positions is not None else torch.arange(stop, device=device)
        key_positions = self.key_positions if self.key_positions is not None else torch.arange(keys, device=device)
        allowed = attention_allowed(queries[start:stop], key_positions, documents=self.documents)
        return allowed[:, 0] if allowed.dim() == 4 else allowed[None]  # [b|1, blk, sk]


def indexer_scores(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor,
                   allowed: torch.Tensor) -> torch.Tensor:
    """The lightning indexer's scores of a block of queries: ``q_index`` [sq, b, H, d], ``k_index`` [sk, b, d],
    ``weights`` [sq, b, H], ``allowed`` [b|1, sq, sk] -> [b, sq, sk] fp32, ``-inf`` where not allowed."""
    scale = q_index.size(-1) ** -0.5
    per_head = torch.einsum("qbhd,kbd->bqhk", q_index.float(), k_index.float()).mul(scale).relu()
    scores = torch.einsum("bqhk,qbh->bqk", per_head, weights.float())  # [b, sq, sk]
    return scores.masked_fill(~allowed, float("-inf"))


@torch.no_grad()
def select_topk(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor, top_k: int,
                rule: Optional[KeyRule] = None, block: int = DEFAULT_BLOCK) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each query's ``top_k`` allowed keys by the indexer's scores: (indices [b, sq, k] int64, valid [b, sq, k]
    bool) with ``k = min(top_k, sk)``; ``valid`` is False where a query has fewer allowed keys than ``k`` (its
    indices there point at keys it may not see, to be masked)."""
    if top_k < 1:
        raise ValueError(f"the indexer's top-k must be >= 1 (got {top_k})")
    rule = rule or KeyRule()
    sq, sk = q_index.size(0), k_index.size(0)
    k = min(top_k, sk)
    indices, valid = [], []
    for start in range(0, sq, block):
        stop = min(start + block, sq)
        allowed = rule.block(start, stop, sk, q_index.device)
        scores = indexer_scores(q_index[start:stop], k_index, weights[start:stop], allowed)
        best, chosen = scores.topk(k, dim=-1)  # [b, blk, k]
        indices.append(chosen)
        valid.append(best > float("-inf"))
    return torch.cat(indices, dim=1), torch.cat(valid, dim=1)


def gather_rows(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """x [b, sk, ...], indices [b, blk, kk] -> [b, blk, kk, ...]: each query's selected rows (one index_select over
    the flattened rows: its backward is an index_add, not advanced indexing's scatter)."""
    b, sk = x.shape[:2]
    offsets = torch.arange(b, device=x.device)[:, None, None] * sk
    rows = x.reshape(b * sk, -1).index_select(0, (indices + offsets).reshape(-1))  # [b blk kk, ...]
    return rows.view(*indices.shape, *x.shape[2:])


def _selected_keys(indices: torch.Tensor, valid: torch.Tensor, keys: int) -> torch.Tensor:
    """indices/valid [b, sq, kk] -> [b, sq, keys] bool, True at the valid selections (an invalid entry may repeat a
    valid one's index: it adds nothing rather than overwriting it)."""
    counts = torch.zeros(*indices.shape[:2], keys, dtype=torch.int32, device=indices.device)
    return counts.scatter_add_(2, indices, valid.to(torch.int32)) > 0


GATHER_BELOW_DENSITY = 1 / 32  # a block gathers its selected rows when k / sk is below this, else scores all keys


def _attend_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor,
                  scale: float, dropout: float = 0.0) -> torch.Tensor:
    """q [b, blk, n, d], k/v [b, sk, n, d|dv], indices/valid [b, blk, kk] -> [b, blk, n, dv] over the selected keys
    (``dropout`` on the probabilities). Sparse selections gather their rows (``[b, blk, kk, n, d]``); dense ones
    (``kk / sk`` at least :data:`GATHER_BELOW_DENSITY`) score the block against every key in one GEMM and mask to
    the selection, which moves less memory. Either way the block's tensors live only while it runs."""
    if indices.size(-1) < GATHER_BELOW_DENSITY * k.size(1):
        keys, values = gather_rows(k, indices), gather_rows(v, indices)  # [b, blk, kk, n, d|dv]
        scores = torch.einsum("bqnd,bqknd->bnqk", q.float(), keys.float()) * scale
        probs = scores.masked_fill(~valid[:, None], float("-inf")).softmax(dim=-1)  # [b, n, blk, kk]
        probs = F.dropout(probs, dropout) if dropout > 0 else probs
        return torch.einsum("bnqk,bqknv->bqnv", probs, values.float()).to(q.dtype)
    selected = _selected_keys(indices, valid, k.size(1))  # [b, blk, sk]
    scores = torch.einsum("bqnd,bknd->bnqk", q.float(), k.float()) * scale  # [b, n, blk, sk]
    probs = scores.masked_fill(~selected[:, None], float("-inf")).softmax(dim=-1)
    probs = F.dropout(probs, dropout) if dropout > 0 else probs
    return torch.einsum("bnqk,bknv->bqnv", probs, v.float()).to(q.dtype)


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor,
                     scale: float, block: int = DEFAULT_BLOCK, dropout: float = 0.0) -> torch.Tensor:
    """Attention of each query over its selected keys: q [sq, b, n, d], k [sk, b, n, d], v [sk, b, n, dv],
    indices/valid [b, sq, kk] -> [sq, b, n, dv]; fp32 scores and softmax, ``O(s kk)`` memory (see the module
    docstring). ``dropout`` on the probabilities draws from the current RNG state; checkpointing replays it."""
    qb, kb, vb = (t.transpose(0, 1) for t in (q, k, v))  # [b, s, n, d]
    outputs = []
    for start in range(0, q.size(0), block):
        args = (qb[:, start:start + block], kb, vb, indices[:, start:start + block], valid[:, start:start + block])
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            outputs.append(checkpoint(_attend_block, *args, scale, dropout, use_reentrant=False))
        else:
            outputs.append(_attend_block(*args, scale, dropout))
    return torch.cat(outputs, dim=1).transpose(0, 1)  # [sq, b, n, dv]


def dense_masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor,
                           valid: torch.Tensor, scale: float) -> torch.Tensor:
    """The reference of :func:`sparse_attention`: full ``[b, n, sq, sk]`` scores, masked to each query's valid
    selections."""
    allowed = _selected_keys(indices, valid, k.size(0))  # [b, sq, sk]
    scores = torch.einsum("qbnd,kbnd->bnqk", q.float(), k.float()) * scale
    probs = scores.masked_fill(~allowed[:, None], float("-inf")).softmax(dim=-1)
    return torch.einsum("bnqk,kbnv->qbnv", probs, v.float()).to(q.dtype)


# --------------------------------------------------------------------------- the indexer loss


def kl_rows(target: torch.Tensor, log_predicted: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """sum over keys of ``target (log target - log_predicted)`` where ``valid``: [b, blk, keys] -> a scalar."""
    terms = target * (target.clamp_min(KL_EPS).log() - log_predicted)
    return terms.masked_fill(~valid, 0.0).sum()


def head_summed_target(scores: torch.Tensor, valid: torch.Tensor, group: Optional[Group]) -> torch.Tensor:
    """Attention probabilities ``softmax(scores)`` [b, n, blk, keys] over ``valid`` [b, blk, keys], summed over all
    heads (this rank's, then the TP group's) and L1-normalised per query: [b, blk, keys]."""
    probs = scores.masked_fill(~valid[:, None], float("-inf")).softmax(dim=-1).sum(dim=1)
    if group is not None and group.size > 1:
        probs = all_reduce(probs.contiguous(), group)
    return probs / probs.sum(dim=-1, keepdim=True).clamp_min(KL_EPS)


def _dense_kl_block(q: torch.Tensor, k: torch.Tensor, q_index: torch.Tensor, k_index: torch.Tensor,
                    weights: torch.Tensor, allowed: torch.Tensor, scale: float, group: Optional[Group]) -> torch.Tensor:
    """The KL sum of a block of queries over every allowed key: q [blk, b, n, d], k [sk, b, n, d], the indexer's
    block, ``allowed`` [b|1, blk, sk]."""
    with torch.no_grad():
        scores = torch.einsum("qbnd,kbnd->bnqk", q.float(), k.float()) * scale  # [b, n, blk, sk]
        allowed = allowed.expand(scores.size(0), -1, -1)
        target = head_summed_target(scores, allowed, group)
    predicted = indexer_scores(q_index, k_index, weights, allowed).log_softmax(dim=-1)  # [b, blk, sk]
    return kl_rows(target, predicted, allowed)


def _sparse_kl_block(q: torch.Tensor, k: torch.Tensor, q_index: torch.Tensor, k_index: torch.Tensor,
                     weights: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor, scale: float,
                     group: Optional[Group]) -> torch.Tensor:
    """The KL sum of a block of queries over their selected keys only (``indices``/``valid`` [b, blk, kk]): the
    selected rows are gathered, nothing ``[blk, sk]`` is built."""
    with torch.no_grad():
        keys = gather_rows(k.transpose(0, 1), indices)  # [b, blk, kk, n, d]
        scores = torch.einsum("qbnd,bqknd->bnqk", q.float(), keys.float()) * scale  # [b, n, blk, kk]
        target = head_summed_target(scores, valid, group)
    index_keys = gather_rows(k_index.transpose(0, 1), indices)  # [b, blk, kk, d]
    per_head = torch.einsum("qbhd,bqkd->bqhk", q_index.float(), index_keys.float()).mul(q_index.size(-1) ** -0.5)
    predicted = torch.einsum("bqhk,qbh->bqk", per_head.relu(), weights.float())  # [b, blk, kk]
    predicted = predicted.masked_fill(~valid, float("-inf")).log_softmax(dim=-1)
    return kl_rows(target, predicted, valid)


def indexer_kl_loss(q: torch.Tensor, k: torch.Tensor, q_index: torch.Tensor, k_index: torch.Tensor,
                    weights: torch.Tensor, scale: float, indices: torch.Tensor, valid: torch.Tensor, sparse: bool,
                    rule: Optional[KeyRule] = None, group: Optional[Group] = None,
                    block: int = DEFAULT_BLOCK) -> torch.Tensor:
    """The mean over queries of ``KL(attention || softmax(indexer))`` (see the module docstring): q [sq, b, n, d]
    and k [sk, b, n, d] the main attention's (this rank's heads; detached here), the indexer's outputs, the
    selections [b, sq, kk]; ``sparse``: over the selected keys, else over every key ``rule`` allows. A scalar
    whose gradient reaches the indexer's outputs only."""
    q, k = q.detach(), k.detach()
    rule = rule or KeyRule()
    total = q_index.new_zeros((), dtype=torch.float32)
    for start in range(0, q.size(0), block):
        stop = min(start + block, q.size(0))
        part = (q[start:stop], k, q_index[start:stop], k_index, weights[start:stop])
        if sparse:
            args = part + (indices[:, start:stop], valid[:, start:stop], scale, group)
            total = total + checkpoint(_sparse_kl_block, *args, use_reentrant=False)
        else:
            allowed = rule.block(start, stop, k.size(0), q.device)
            total = total + checkpoint(_dense_kl_block, *part, allowed, scale, group, use_reentrant=False)
    return total / (q.size(0) * q.size(1))
