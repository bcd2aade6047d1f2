"""The factor each micro-batch's loss is multiplied by before its backward, as the schedule set it.

A schedule divides each micro-batch's loss by the number of micro-batches and applies the loss scale
(mixed precision) before starting its backward: ``d(backward loss) / d(micro-batch loss)``. A loss that
starts its own backward from inside the model, as the MoE router's auxiliary losses do
(``core/transformer/moe/aux_losses.py``), reads the same factor here, so it acts as if it were added to
the micro-batch's loss, on every pipeline stage and with any schedule.
"""
from __future__ import annotations

import torch

_scale = torch.ones(())  # loss scale / micro-batches


def set_microbatch_loss_scale(scale: torch.Tensor) -> None:
    """The factor the schedule applies to each micro-batch's loss before its backward (a scalar)."""
    global _scale
    _scale = scale.detach().reshape(())


def microbatch_loss_scale() -> torch.Tensor:
    """The factor set last by :func:`set_microbatch_loss_scale` (1 before any schedule ran)."""
    return _scale
