"""The MoE router's auxiliary losses: their gradient, and their values for the training log.

The losses (load balancing, z-loss; already times their coefficients) are not added to the
task's loss. Each MoE layer hands its loss to :func:`attach_aux_loss`, an identity on the layer's
output whose backward also starts the loss's own backward with the gradient the main loss gets
(Megatron's MoEAuxLossAutoScaler): ``loss scale / micro-batches``, which the schedules set in
``core/pipeline_parallel/loss_scale.py``. So the losses act on every pipeline stage, inside activation
recompute and with any schedule, as if added to the loss of the micro-batch.

For the log each layer adds the loss values of its training forwards into ``tracked`` (not
when recompute runs the forward again); :func:`take_tracked_aux_losses` sums and clears them.
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

import torch
from torch import nn

from core.pipeline_parallel.loss_scale import microbatch_loss_scale
from core.transformer.config import TransformerConfig


class _AttachAuxLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, output: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux_loss)
        return output.view_as(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (aux_loss,) = ctx.saved_tensors
        scale = microbatch_loss_scale()  # d(backward loss) / d(micro-batch loss)
        return grad, (scale.to(aux_loss.device, aux_loss.dtype) * torch.ones_like(aux_loss))


def attach_aux_loss(output: torch.Tensor, aux_loss: torch.Tensor) -> torch.Tensor:
    """``output`` unchanged; its backward also backpropagates ``aux_loss`` (a scalar) as part of the loss."""
    if not (torch.is_grad_enabled() and aux_loss.requires_grad):
        return output
    return _AttachAuxLoss.apply(output, aux_loss)


def take_tracked_aux_losses(modules: Iterable[nn.Module]) -> Dict[str, torch.Tensor]:
    """Per loss name, the sum over the MoE layers among ``modules`` of their tracked values; clears them."""
    totals: Dict[str, torch.Tensor] = {}
    for module in modules:
        tracked = getattr(module, "tracked_aux_losses", None)
        if tracked is None:
            continue
        for name, value in tracked.items():
            totals[name] = totals[name] + value if name in totals else value
        tracked.clear()
    return totals


def aux_loss_names(config: TransformerConfig) -> Tuple[str, ...]:
    """The router losses a model trains with and logs (Megatron's names); none for a dense model."""
    if config.num_experts is None:
        return ()
    names: Tuple[str, ...] = ()
    if config.moe_router_load_balancing_type != "none" and config.moe_aux_loss_coeff > 0:
        names += ("load_balancing_loss",)
    if config.moe_z_loss_coeff is not None:
        names += ("z_loss",)
    return names
