"""ALiBi: attention with linear biases (Press et al.; Bloom, MPT), ``--position-embedding-type alibi``.

Head ``h`` adds ``slope[h] * key_position`` to its attention scores before the
causal mask and the softmax; there are no parameters. Bloom writes the bias
this way and MPT as ``slope * (key_position - (s - 1))``; the two differ by a
constant per query row, which the softmax ignores. The slopes follow MPT's
formula, ``2 ** (-bias_max * i / n)`` for ``i = 1..n`` over the next power of
two ``n`` of the head count, taking the odd-``i`` slopes after the even ones
when the head count is not a power of two; with ``bias_max = 8``
(``--alibi-bias-max``) this is Bloom's formula (its closest-power-of-2
interleave) too. Slopes and bias are computed in fp32. Each TP rank uses the
slopes of its own query heads.
"""
from __future__ import annotations

import functools
import math
from typing import Optional

import torch


def alibi_slopes(num_heads: int, bias_max: float = 8.0) -> torch.Tensor:
    """The per-head slopes ``[num_heads]`` (fp32)."""
    power = 2 ** math.ceil(math.log2(num_heads))
    exponents = torch.arange(1, power + 1, dtype=torch.float32) * (bias_max / power)  # [power]
    slopes = 1.0 / torch.pow(2.0, exponents)
    if power != num_heads:  # the odd-numbered slopes (Bloom's finer ones) after the even ones
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:num_heads]
    return slopes


def alibi_bias(num_heads: int, first_head: int, local_heads: int, key_positions: torch.Tensor,
               bias_max: float) -> torch.Tensor:
    """The bias ``[local_heads, 1, sk]`` (fp32) heads ``first_head..`` add to the scores of keys at
    ``key_positions`` (sequence indices; the same for every query)."""
    slopes = alibi_slopes(num_heads, bias_max)[first_head:first_head + local_heads].to(key_positions.device)
    return slopes[:, None, None] * key_positions.float()[None, None, :]


@functools.lru_cache(maxsize=4)
def alibi_attention_mask(num_heads: int, first_head: int, local_heads: int, seq_len: int, bias_max: float,
                         window: Optional[int], device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask ``[local_heads, s, s]`` of heads ``first_head..first_head + local_heads - 1``: the ALiBi
    bias where query i may attend key j (``j <= i``, and ``j > i - window`` with a sliding window), ``-inf``
    elsewhere. Cached: the layers of a rank share it."""
    positions = torch.arange(seq_len, device=device)
    bias = alibi_bias(num_heads, first_head, local_heads, positions, bias_max)  # [np, 1, s]
    query, key = positions[:, None], positions[None, :]
    allowed = key <= query  # [s, s]
    if window is not None:
        allowed = allowed & (key > query - window)
    return bias.masked_fill(~allowed, float("-inf")).to(dtype)  # [np, s, s]
