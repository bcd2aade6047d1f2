"""Forward/backward schedules over the micro-batches of one global batch.

``forward_backward_no_pipelining`` runs every micro-batch through the whole
model and accumulates gradients (PP = 1). Pipeline schedules (1F1B,
interleaved, zero-bubble) are pure tables run by one executor and live beside
it when pipeline parallelism is enabled.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Dict, Iterator, List, Tuple

import torch
from torch import nn

# forward_step(batch, model) -> (scalar loss averaged over the micro-batch's tokens, logging stats)
ForwardStep = Callable[[Dict[str, torch.Tensor], nn.Module], Tuple[torch.Tensor, Dict[str, torch.Tensor]]]


def forward_backward_no_pipelining(forward_step: ForwardStep, data_iterator: Iterator[Dict[str, torch.Tensor]],
                                   model: nn.Module, num_microbatches: int, forward_only: bool = False,
                                   scale_loss: Callable[[torch.Tensor], torch.Tensor] = lambda x: x,
                                   no_sync: Callable[[], ContextManager] = contextlib.nullcontext
                                   ) -> List[Dict[str, Any]]:
    """Run ``num_microbatches`` forward (and backward) passes; return each micro-batch's stats.

    The loss of each micro-batch is divided by ``num_microbatches`` so the
    accumulated gradient is that of the mean over the global batch. All but the
    last backward run inside ``no_sync()``, so overlapped gradient reductions
    start only during the last one.
    """
    stats = []
    grad_context = torch.no_grad() if forward_only else contextlib.nullcontext()
    for index in range(num_microbatches):
        batch = next(data_iterator)
        sync_context = no_sync() if index < num_microbatches - 1 else contextlib.nullcontext()
        with sync_context:
            with grad_context:
                loss, micro_stats = forward_step(batch, model)
            if not forward_only:
                scale_loss(loss / num_microbatches).backward()
        stats.append(micro_stats)
    return stats
