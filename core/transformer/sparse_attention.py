"""DeepSeek Sparse Attention (DSA: DeepSeek-V3.2, GLM-5): the lightning indexer, each query's top-k keys, and
attention over those keys only.

**The lightning indexer** scores every causal (query ``t``, key ``j``) pair with a few small heads::

    I[t, j] = sum_h w[t, h] * relu(scale * q_I[t, h] . k_I[j])          scale = d_I^-1/2

``q_I`` (``[H, d_I]`` per token) is projected from MLA's query latent, ``k_I`` (one ``d_I`` vector per token, shared
by the heads) from the hidden state through a LayerNorm, and ``w`` (``[H]`` per token, times ``H^-1/2``) from the
hidden state; both carry RoPE on their first rope channels (half-split pairs, whatever MLA's own layout).
DeepSeek's kernels rotate q and k by a Hadamard transform and score in FP8; the transform is orthogonal, so
``q . k`` is unchanged, and FP8 is a precision choice: neither is reproduced.

**Selection** (:func:`select_topk`): each query keeps the ``top_k`` causal keys of highest ``I`` (all of them when
it has fewer). The scores are built a block of queries at a time (``[b, block, s]``) and only the indices kept,
so the selection needs ``O(s k)`` memory besides one block's scores.

**Sparse attention** (:func:`sparse_attention`): ``softmax(scale q k_sel^T) v_sel`` over the selected keys, per
head. A block of queries gathers the key and value rows of its selections (``[b, block, k, heads, d]``) and runs
under activation checkpointing, so the forward holds one block's gathered rows and scores and the backward keeps
only the indices and the block's inputs: memory grows as ``s k``, not ``s^2``. :func:`dense_masked_attention` is
the reference: full scores masked to the same selections.

Shapes follow the decoder's: ``[s, b, heads, dim]`` in and out.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from core.transformer.rope import apply_rotary

DEFAULT_BLOCK = 128  # queries per block of the selection and of the sparse attention
INDEXER_NORM_EPS = 1e-6  # the LayerNorm of the indexer's keys (DeepSeek-V3.2's)


class LightningIndexer(nn.Module):
    """DSA's indexer of one layer: ``forward(hidden [s, b, h], q_latent [s, b, r], cos, sin)`` -> (q_index
    [s, b, H, d], k_index [s, b, d], weights [s, b, H]) for :func:`select_topk`. ``wq_b`` reads MLA's normed
    query latent, ``wk`` and ``weights_proj`` the hidden state; cos/sin ``[s, b|1, 1, rope]`` in the half-split
    layout (:func:`half_split_rotary`). Its weights are whole on every TP rank: every rank selects the same keys
    for its own heads."""

    def __init__(self, hidden_size: int, q_lora_rank: int, heads: int, head_dim: int, rope_dim: int,
                 dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        if rope_dim > head_dim:
            raise ValueError(f"the indexer's head dim {head_dim} is narrower than the rope channels {rope_dim}")
        self.heads, self.head_dim, self.rope_dim = heads, head_dim, rope_dim
        self.wq_b = nn.Linear(q_lora_rank, heads * head_dim, bias=False, dtype=dtype)
        self.wk = nn.Linear(hidden_size, head_dim, bias=False, dtype=dtype)
        self.k_norm = nn.LayerNorm(head_dim, eps=INDEXER_NORM_EPS, dtype=dtype)
        self.weights_proj = nn.Linear(hidden_size, heads, bias=False, dtype=dtype)

    def forward(self, hidden: torch.Tensor, q_latent: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        s, b = hidden.shape[:2]
        q_index = apply_rotary(self.wq_b(q_latent).view(s, b, self.heads, self.head_dim), cos, sin)
        k_index = apply_rotary(self.k_norm(self.wk(hidden)).unsqueeze(2), cos, sin).squeeze(2)  # [s, b, d]
        weights = self.weights_proj(hidden) * self.heads ** -0.5  # [s, b, H]
        return q_index, k_index, weights


def half_split_rotary(cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The model's rotary tables in the half-split layout the indexer rotates with (MLA's may be interleaved:
    each angle twice in a row)."""
    if not interleaved:
        return cos, sin
    return tuple(torch.cat([t[..., 0::2], t[..., 0::2]], dim=-1) for t in (cos, sin))


def indexer_scores(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor, first_query: int = 0
                   ) -> torch.Tensor:
    """The lightning indexer's causal scores of a block of queries: ``q_index`` [sq, b, H, d] (queries
    ``first_query ..``), ``k_index`` [sk, b, d] (every key), ``weights`` [sq, b, H] -> [b, sq, sk] fp32, ``-inf``
    at the keys after each query."""
    scale = q_index.size(-1) ** -0.5
    per_head = torch.einsum("qbhd,kbd->bqhk", q_index.float(), k_index.float()).mul_(scale).relu_()
    scores = torch.einsum("bqhk,qbh->bqk", per_head, weights.float())  # [b, sq, sk]
    queries = torch.arange(first_query, first_query + q_index.size(0), device=scores.device)
    future = torch.arange(k_index.size(0), device=scores.device)[None, :] > queries[:, None]  # [sq, sk]
    return scores.masked_fill_(future, float("-inf"))


@torch.no_grad()
def select_topk(q_index: torch.Tensor, k_index: torch.Tensor, weights: torch.Tensor, top_k: int,
                block: int = DEFAULT_BLOCK) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each query's ``top_k`` causal keys by the indexer's scores: (indices [b, s, k] int64, valid [b, s, k] bool)
    with ``k = min(top_k, s)``; ``valid`` is False where a query has fewer causal keys than ``k`` (its indices
    there point at future keys, to be masked)."""
    if top_k < 1:
        raise ValueError(f"the indexer's top-k must be >= 1 (got {top_k})")
    s = q_index.size(0)
    k = min(top_k, s)
    indices, valid = [], []
    for start in range(0, s, block):
        scores = indexer_scores(q_index[start:start + block], k_index, weights[start:start + block], start)
        best, chosen = scores.topk(k, dim=-1)  # [b, blk, k]
        indices.append(chosen)
        valid.append(best > float("-inf"))
    return torch.cat(indices, dim=1), torch.cat(valid, dim=1)


def _attend_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor,
                  scale: float) -> torch.Tensor:
    """q [b, blk, n, d], k/v [b, s, n, d|dv], indices/valid [b, blk, kk] -> [b, blk, n, dv] over the selected keys."""
    batch = torch.arange(q.size(0), device=q.device)[:, None, None]
    keys, values = k[batch, indices], v[batch, indices]  # [b, blk, kk, n, d|dv]
    scores = torch.einsum("bqnd,bqknd->bnqk", q.float(), keys.float()) * scale
    scores = scores.masked_fill(~valid[:, None], float("-inf"))
    probs = scores.softmax(dim=-1)  # [b, n, blk, kk]
    return torch.einsum("bnqk,bqknv->bqnv", probs, values.float()).to(q.dtype)


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor, valid: torch.Tensor,
                     scale: float, block: int = DEFAULT_BLOCK) -> torch.Tensor:
    """Attention of each query over its selected keys: q/k [s, b, n, d], v [s, b, n, dv], indices/valid [b, s, kk]
    -> [s, b, n, dv]; fp32 scores and softmax, ``O(s kk)`` memory (see the module docstring)."""
    qb, kb, vb = (t.transpose(0, 1) for t in (q, k, v))  # [b, s, n, d]
    outputs = []
    for start in range(0, q.size(0), block):
        args = (qb[:, start:start + block], kb, vb, indices[:, start:start + block], valid[:, start:start + block])
        if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
            outputs.append(checkpoint(_attend_block, *args, scale, use_reentrant=False))
        else:
            outputs.append(_attend_block(*args, scale))
    return torch.cat(outputs, dim=1).transpose(0, 1)  # [s, b, n, dv]


def dense_masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, indices: torch.Tensor,
                           valid: torch.Tensor, scale: float) -> torch.Tensor:
    """The reference of :func:`sparse_attention`: full ``[b, n, s, s]`` scores, masked to each query's valid
    selections."""
    b, s = indices.shape[:2]
    allowed = torch.zeros(b, s, k.size(0), dtype=torch.bool, device=q.device)
    allowed.scatter_(2, indices, valid)  # [b, s, s]
    scores = torch.einsum("qbnd,kbnd->bnqk", q.float(), k.float()) * scale
    probs = scores.masked_fill(~allowed[:, None], float("-inf")).softmax(dim=-1)
    return torch.einsum("bnqk,kbnv->qbnv", probs, v.float()).to(q.dtype)
