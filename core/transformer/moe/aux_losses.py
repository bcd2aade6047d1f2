"""The auxiliary losses of layers (the MoE router's load balancing and z-loss, DSA's indexer loss): their
gradient, and their values for the training log.

The losses (already times their coefficients) are not added to the task's loss. Each MoE or DSA layer hands
its loss to :func:`attach_aux_loss`, an identity on the layer's
output whose backward also starts the loss's own backward with the gradient the main loss gets
(Megatron's MoEAuxLossAutoScaler): ``loss scale / micro-batches``, which the schedules set in
``core/pipeline_parallel/loss_scale.py``. So the losses act on every pipeline stage, inside activation
recompute and with any schedule, as if added to the loss of the micro-batch.

For the log each layer adds the loss values of its training forwards into ``tracked_aux_losses`` (not
when recompute runs the forward again); :func:`take_tracked_aux_losses` sums and clears them, and
:func:`aux_loss_layers` says how many layers of the model add to each name (the log's mean is per layer).
"""
from __future__ import annotations

from typing import Dict, Iterable, Tuple

import torch
from torch import nn

from core.pipeline_parallel.loss_scale import microbatch_loss_scale
from core.tensor_parallel.checkpoint import is_recomputing
from core.transformer.config import TransformerConfig

DSA_INDEXER_LOSS = "indexer loss"  # Megatron-core's name in the log


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


def track_aux_losses(tracked: Dict[str, torch.Tensor], losses: Dict[str, torch.Tensor]) -> None:
    """Add a forward's loss values (detached, fp32) into a layer's ``tracked`` (its ``tracked_aux_losses``), unless
    the forward is activation recompute running it again."""
    if is_recomputing():
        return
    for name, loss in losses.items():
        tracked[name] = tracked.get(name, 0.0) + loss.detach().float()


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
    """The auxiliary losses a model trains with and logs (Megatron's names); none for a dense model without an
    indexer loss."""
    names: Tuple[str, ...] = ()
    if config.num_experts is not None:
        if config.moe_router_load_balancing_type != "none" and config.moe_aux_loss_coeff > 0:
            names += ("load_balancing_loss",)
        if config.moe_z_loss_coeff is not None:
            names += ("z_loss",)
    if config.has_lightning_indexer and config.dsa_indexer_loss_coeff > 0:
        names += (DSA_INDEXER_LOSS,)
    return names


def aux_loss_layers(config: TransformerConfig, name: str) -> int:
    """How many layers of the whole model (MTP layers included, built as the last decoder layer) add to the loss
    ``name`` in one forward."""
    if name == DSA_INDEXER_LOSS:  # the layers that compute their own top-k
        counts = [config.computes_topk(i) for i in range(config.num_layers)]
    else:
        counts = [config.is_moe_layer(i) for i in range(config.num_layers)]
    decoder = sum(count and i not in config.noop_layers for i, count in enumerate(counts))
    return decoder + (config.mtp_num_layers or 0) * counts[-1]
