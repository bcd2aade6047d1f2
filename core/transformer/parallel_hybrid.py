"""Falcon-H1's token mixer (``--hybrid-override-pattern`` 'H'): a Mamba2 and an attention side by side.

Both read the layer's one normed input ``n``; their outputs are summed before the residual add::

    mixer(n) = mamba(n) + attention(n * attention_in) * attention_out

with the Mamba mixer's own muP scales (``--ssm-in-multiplier``, ``--ssm-multipliers``,
``--ssm-out-multiplier``) inside :class:`~core.transformer.mamba_mixer.MambaMixer` and the attention's
(``--attention-in-multiplier``, ``--attention-out-multiplier``) here. Each half is the module the other layer
kinds use, so TP splits the Mamba heads and the attention heads alike, sequence parallelism gathers and
scatters each half's sequence, context parallelism runs the attention's CP algorithm and passes the Mamba
state from rank to rank, and packed documents restart both.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from core.parallel_state import ParallelState
from core.transformer.attention import SelfAttention
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import SequenceLayout
from core.transformer.mamba_mixer import MambaMixer, scaled


class MambaAndAttention(nn.Module):
    """``mamba(n) + attention(n * in) * out``; ``[s, b, h]`` in and out (``[s/tp, b, h]`` under SP)."""

    def __init__(self, config: TransformerConfig, state: ParallelState, layer_number: int = 0) -> None:
        super().__init__()
        self.config = config
        self.mamba = MambaMixer(config, state, layer_number)
        self.attention = SelfAttention(config, state, layer_number)

    def forward(self, hidden: torch.Tensor, rotary: Optional[tuple],
                layout: Optional[SequenceLayout] = None) -> torch.Tensor:
        # hidden [s, b, h] ([s/tp, b, h] under SP), the layer's normed input
        cfg = self.config
        attention = self.attention(scaled(hidden, cfg.attention_in_multiplier), rotary, layout)
        return self.mamba(hidden, layout) + scaled(attention, cfg.attention_out_multiplier)  # [s, b, h]
