"""Absolute position embeddings added to the word embeddings: learned (GPT-2, OPT) or fixed sinusoidal (XGLM).

``--position-embedding-type learned_absolute`` (Megatron's name) adds a row of a
learned ``[max_position_embeddings + offset, h]`` table, replicated over TP;
``--position-embedding-type sinusoidal`` adds fairseq's fixed table (no
parameters): for ``d = h // 2`` frequencies ``f_i = exp(-i * ln(10000) / (d - 1))``
the row of position ``p`` is ``[sin(p f_0..f_{d-1}), cos(p f_0..f_{d-1})]`` (a zero
column when ``h`` is odd). ``--position-embedding-offset`` shifts the row index:
token ``j`` reads row ``position_j + offset`` (OPT, BioGpt and XGLM keep two
leading rows, so the HF table converts by a copy).

Positions are ``0 .. s-1``, or the given ``position_ids`` ``[b, s]``. Under
sequence parallelism each TP rank holds a contiguous chunk ``[s/tp, b, h]`` of
the sequence and adds the rows of its own positions, so the learned table's
gradient is a partial sum over TP (marked ``grad_partial_over_tp``; summed in
the gradient sync like the norms').
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from core.parallel_state import Group
from core.tensor_parallel.layers import mark_param
from core.transformer.config import TransformerConfig


def local_position_ids(seq_len: int, position_ids: Optional[torch.Tensor], group: Group, sequence_parallel: bool,
                       device: torch.device) -> torch.Tensor:
    """This rank's positions ``[s, b|1]`` (``[s/tp, b|1]`` under SP, its contiguous chunk of the sequence)."""
    if position_ids is not None:
        positions = position_ids.t().to(device)  # [b, s] -> [s, b]
    else:
        positions = torch.arange(seq_len, device=device)[:, None]  # [s, 1]
    if sequence_parallel and group.size > 1:
        chunk = positions.size(0) // group.size
        positions = positions[group.rank * chunk:(group.rank + 1) * chunk]  # [s/tp, b|1]
    return positions


def sinusoidal_embedding(positions: torch.Tensor, dim: int, t2t: bool = False) -> torch.Tensor:
    """fairseq's fixed embedding ``[..., dim]`` (fp32) of integer ``positions`` (the table's row numbers);
    ``t2t``: tensor2tensor's frequencies ``10000^(-k / (dim / 2))`` (CTRL) instead of ``10000^(-k / (dim / 2 - 1))``."""
    half = dim // 2
    step = math.log(10000) / (half if t2t else half - 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.int64, device=positions.device).float() * -step)  # [d]
    angles = positions.float().unsqueeze(-1) * freqs  # [..., d]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)  # [..., 2d]
    if dim % 2:
        table = F.pad(table, (0, 1))
    return table


class PositionEmbedding(nn.Module):
    """Absolute position embeddings ``[s, b|1, h]`` for this rank's tokens (learned or sinusoidal)."""

    def __init__(self, config: TransformerConfig, group: Group) -> None:
        super().__init__()
        self.config, self.group = config, group
        self.learned = config.position_embedding_type == "learned_absolute"
        if self.learned:  # replicated over TP; under SP each rank's gradient covers its positions only
            rows = config.max_position_embeddings + config.position_embedding_offset
            self.weight = mark_param(nn.Parameter(torch.empty(rows, config.hidden_size, dtype=config.params_dtype)),
                                     init="normal", grad_partial_over_tp=config.sequence_parallel)

    def forward(self, seq_len: int, position_ids: Optional[torch.Tensor], device: torch.device,
                dtype: torch.dtype) -> torch.Tensor:
        cfg = self.config
        rows = local_position_ids(seq_len, position_ids, self.group, cfg.sequence_parallel, device)
        rows = rows + cfg.position_embedding_offset  # [s, b|1] table rows
        if self.learned:
            return F.embedding(rows, self.weight).to(dtype)  # [s, b|1, h]
        return sinusoidal_embedding(rows, cfg.hidden_size, cfg.sinusoidal_t2t_frequencies).to(dtype)  # [s, b|1, h]
