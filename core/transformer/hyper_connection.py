"""Manifold-constrained hyper-connections (mHC, ``--enable-mhc-connections``), as DeepSeek-V4 computes them.

The residual stream is ``n`` (``--mhc-num-residual-streams``) copies of the hidden state, carried flat as
``[s, b, n h]`` between layers and pipeline stages (the first stage repeats the embeddings). Around each
attention and MLP branch a :class:`HyperConnection` reads the streams ``X`` (``[n, h]`` per token), RMS-normalised
over all ``n h`` values and projected to ``2 n + n^2`` mixing logits, and returns

* ``pre`` ``[n]`` = sigmoid(logits * scale_0 + base) + eps: the branch reads ``sum_i pre_i X_i``;
* ``post`` ``[n]`` = 2 sigmoid(logits * scale_1 + base): the branch output ``y`` is written as ``post_i y``;
* ``comb`` ``[n, n]``: softmax rows + eps, then ``--mhc-sinkhorn-iterations`` Sinkhorn-Knopp steps (a column
  normalisation, then rows and columns alternately, each sum floored by ``--mhc-eps``) towards a doubly
  stochastic matrix; the new streams are ``post y + comb^T X``.

The model's last stage collapses the streams with a :class:`HyperHead` (``sigmoid(...) + eps`` weights, no
post or comb) before the final norm. The mixing runs in fp32 (transformers keeps these modules in fp32).
The parameters are replicated over TP; under sequence parallelism each rank sees its share of the tokens, so
their gradients are partial sums over TP.
"""
from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F
from torch import nn

from core.tensor_parallel.layers import mark_param
from core.transformer.config import TransformerConfig


def _normed_flat(streams: torch.Tensor, eps: float) -> torch.Tensor:
    """``[s, b, n h]`` in fp32, RMS-normalised over all of a token's streams (no weight)."""
    flat = streams.float()
    return flat * torch.rsqrt(flat.square().mean(-1, keepdim=True) + eps)


def split_streams(streams: torch.Tensor, count: int) -> torch.Tensor:
    """The flat streams ``[s, b, n h]`` as ``[s, b, n, h]``."""
    return streams.unflatten(-1, (count, -1))


def sinkhorn(comb: torch.Tensor, iterations: int, eps: float) -> torch.Tensor:
    """DeepSeek-V4's projection of positive ``comb`` ``[..., n, n]`` towards a doubly stochastic matrix: a column
    normalisation, then ``iterations - 1`` row-then-column normalisations (each sum plus ``eps``)."""
    comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    for _ in range(iterations - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)
    return comb


class HyperConnection(nn.Module):
    """The mixing around one branch: :meth:`forward` gives (post, comb, branch input), :meth:`merge` the new
    streams."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        n, dtype, partial = config.mhc_num_residual_streams, config.params_dtype, config.sequence_parallel
        self.streams = n
        self.norm_eps, self.eps, self.iterations = config.norm_epsilon, config.mhc_eps, config.mhc_sinkhorn_iterations
        self.fn = mark_param(nn.Parameter(torch.empty((2 + n) * n, n * config.hidden_size, dtype=dtype)),
                             init="normal", grad_partial_over_tp=partial)
        self.base = mark_param(nn.Parameter(torch.empty((2 + n) * n, dtype=dtype)), init="zeros",
                               grad_partial_over_tp=partial)
        self.scale = mark_param(nn.Parameter(torch.empty(3, dtype=dtype)), init="ones", grad_partial_over_tp=partial)

    def forward(self, streams: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """streams ``[s, b, n h]`` -> post ``[s, b, n]``, comb ``[s, b, n, n]`` (fp32) and the branch input
        ``[s, b, h]`` in the streams' dtype."""
        n = self.streams
        mixes = F.linear(_normed_flat(streams, self.norm_eps), self.fn.float())  # [s, b, (2 + n) n]
        pre, post, comb = mixes.split([n, n, n * n], dim=-1)
        base_pre, base_post, base_comb = self.base.float().split([n, n, n * n])
        scale = self.scale.float()
        pre = torch.sigmoid(pre * scale[0] + base_pre) + self.eps  # [s, b, n]
        post = 2 * torch.sigmoid(post * scale[1] + base_post)
        comb = torch.softmax((comb * scale[2] + base_comb).unflatten(-1, (n, n)), dim=-1) + self.eps
        comb = sinkhorn(comb, self.iterations, self.eps)  # [s, b, n, n]
        collapsed = (pre.unsqueeze(-1) * split_streams(streams, n)).sum(dim=2)  # [s, b, h]
        return post, comb, collapsed.to(streams.dtype)

    def merge(self, streams: torch.Tensor, output: torch.Tensor, post: torch.Tensor,
              comb: torch.Tensor) -> torch.Tensor:
        """The new streams ``post y + comb^T X`` ``[s, b, n h]`` from the branch output ``y`` [s, b, h]."""
        dtype = streams.dtype
        mixed = torch.matmul(comb.to(dtype).transpose(-1, -2), split_streams(streams, self.streams))  # [s, b, n, h]
        return (post.to(dtype).unsqueeze(-1) * output.unsqueeze(-2) + mixed).flatten(-2)


class HyperHead(nn.Module):
    """The last stage's collapse of the streams ``[s, b, n h]`` -> ``[s, b, h]`` before the final norm."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        n, dtype, partial = config.mhc_num_residual_streams, config.params_dtype, config.sequence_parallel
        self.streams, self.norm_eps, self.eps = n, config.norm_epsilon, config.mhc_eps
        self.fn = mark_param(nn.Parameter(torch.empty(n, n * config.hidden_size, dtype=dtype)), init="normal",
                             grad_partial_over_tp=partial)
        self.base = mark_param(nn.Parameter(torch.empty(n, dtype=dtype)), init="zeros", grad_partial_over_tp=partial)
        self.scale = mark_param(nn.Parameter(torch.empty(1, dtype=dtype)), init="ones", grad_partial_over_tp=partial)

    def forward(self, streams: torch.Tensor) -> torch.Tensor:
        mixes = F.linear(_normed_flat(streams, self.norm_eps), self.fn.float())  # [s, b, n]
        pre = torch.sigmoid(mixes * self.scale.float() + self.base.float()) + self.eps
        return (pre.unsqueeze(-1) * split_streams(streams, self.streams)).sum(dim=2).to(streams.dtype)


def expand_streams(hidden: torch.Tensor, streams: int) -> torch.Tensor:
    """The first stage's streams: ``streams`` copies of the embeddings ``[s, b, h]`` -> ``[s, b, n h]``."""
    return hidden.repeat(1, 1, streams)
