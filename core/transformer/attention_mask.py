"""Which keys a query may attend to, from the tokens' places in the sequence.

Every attention mask of the suite is one rule over two position vectors: query ``i`` sees key ``j`` when
``j <= i`` (causal), ``j > i - window`` with a sliding window, ``j // chunk == i // chunk`` with chunked
attention (Llama 4), and, with per-document attention (``--reset-attention-mask`` or a packed SFT
dataset), only when both tokens belong to the same document. Positions are indices in the full sequence,
so the same rule serves one process, a context-parallel rank holding scattered chunks of the sequence,
and one block of ring attention.
"""
from __future__ import annotations

from typing import Optional

import torch


def attention_allowed(query_positions: torch.Tensor, key_positions: torch.Tensor, window: Optional[int] = None,
                      chunk: Optional[int] = None, documents: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Boolean mask (True = attend): ``[sq, sk]``, or ``[b, 1, sq, sk]`` with ``documents``.

    ``query_positions`` [sq] and ``key_positions`` [sk] are sequence indices; ``documents`` [b, s] numbers
    the document of every token of the full sequence (any integers; equal = same document). Per-row
    positions ``[b, sq]`` / ``[b, sk]`` (generation with left padding) give ``[b, sq, sk]`` (no ``documents``).
    """
    query, key = query_positions[..., :, None], key_positions[..., None, :]
    allowed = key <= query  # [sq, sk] ([b, sq, sk] with per-row positions)
    if window is not None:
        allowed = allowed & (key > query - window)
    if chunk is not None:
        allowed = allowed & (torch.div(key, chunk, rounding_mode="floor")
                             == torch.div(query, chunk, rounding_mode="floor"))
    if documents is None:
        return allowed
    same_document = documents[:, query_positions][:, :, None] == documents[:, key_positions][:, None, :]
    return (allowed & same_document)[:, None]  # [b, 1, sq, sk]


def document_ids(tokens: torch.Tensor, eod: int) -> torch.Tensor:
    """``tokens`` [b, s] -> the document number of each token [b, s]: it grows by one after every ``eod``
    (the end-of-document token belongs to the document it ends; Megatron's ``--reset-attention-mask``)."""
    ends = (tokens == eod).to(torch.int64)
    return torch.cumsum(ends, dim=1) - ends  # [b, s]
