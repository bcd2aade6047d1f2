"""Global gradient norm over TP and PP, and clipping by it.

Every optimizer counts a parameter's gradient through :func:`norm_squared_of_range`,
which reads the parameter's :class:`~core.tensor_parallel.param_meta.ParamMeta`:
a parameter replicated over TP (a norm weight, a row-parallel bias) is counted
once, on TP rank 0 only; a fused weight with replicated KV heads counts each
replicated head once through :meth:`TPShard.replica_weights`; the last pipeline
stage's copy of tied embeddings (``excluded_from_grad_norm``) is not counted:
its twin on the first stage is. Expert parameters differ per EP rank, so their
part of the norm is also summed over the EP group.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import torch

from core.parallel_state import Group
from core.tensor_parallel.mappings import all_reduce, any_rank
from core.tensor_parallel.param_meta import param_meta


def norm_squared_of_range(param: torch.Tensor, grad: torch.Tensor, flat_start: int, tp_rank: int,
                          tp: int, local_shape: Optional[Sequence[int]] = None) -> torch.Tensor:
    """Squared norm of ``grad``, the elements ``[flat_start, flat_start + n)`` of ``param``'s
    flattened TP-local tensor, counting TP-replicated values once.

    The whole gradient is the window at 0; distributed-optimizer pieces and FSDP
    shards are windows. ``local_shape``: the TP-local shape (default ``param.shape``;
    FSDP gives it, its parameters being DP shards).
    """
    meta = param_meta(param)
    if meta.excluded_from_grad_norm:
        return grad.new_zeros((), dtype=torch.float32)
    shard = meta.tp_shard
    if shard is None:
        counted = tp_rank == 0 or meta.distinct_over_tp  # replicated over TP: once
        return grad.float().pow(2).sum() if counted else grad.new_zeros((), dtype=torch.float32)
    if not shard.has_replicas(tp):
        return grad.float().pow(2).sum()
    weights = shard.replica_weights(param.shape if local_shape is None else local_shape, tp, grad.device)
    weights = weights[flat_start:flat_start + grad.numel()]  # [n]
    return (grad.float().reshape(-1).pow(2) * weights).sum()


def _sum_of_squares(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], tp_group: Group) -> torch.Tensor:
    parts = [norm_squared_of_range(p, g.reshape(-1), 0, tp_group.rank, tp_group.size) for p, g in zip(params, grads)]
    return torch.stack(parts).sum()


def global_grad_norm(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], tp_group: Group,
                     model_parallel_group: Group, ep_group: Optional[Group] = None) -> float:
    """L2 norm of the full model's gradient, identical on every rank of the model-parallel group.

    Expert parameters (each EP rank holds other experts) are summed over ``ep_group`` too.
    """
    if grads:
        device = grads[0].device
        experts = [param_meta(p).is_expert for p in params]
        dense = [(p, g) for p, g, e in zip(params, grads, experts) if not e]
        total = _sum_of_squares(*zip(*dense), tp_group) if dense else torch.zeros((), device=device)
        if any(experts):
            expert = [(p, g) for p, g, e in zip(params, grads, experts) if e]
            expert_total = _sum_of_squares(*zip(*expert), tp_group).reshape(1)
            all_reduce(expert_total, ep_group or Group([0]))
            total = total + expert_total[0]
    else:
        device = torch.device("cpu")
        total = torch.zeros((), device=device)
    total = total.reshape(1).to(device)
    all_reduce(total, model_parallel_group)
    return float(total.sqrt().item())


def clip_grads(grads: List[torch.Tensor], total_norm: float, max_norm: float) -> None:
    """Scale gradients in place so their global norm is at most ``max_norm``."""
    if max_norm <= 0:
        return
    coefficient = max_norm / (total_norm + 1.0e-6)
    if coefficient < 1.0:
        torch._foreach_mul_(grads, coefficient)


def any_non_finite(grads: Sequence[torch.Tensor], model_parallel_group: Group) -> bool:
    """True when any rank of the group holds an inf or nan gradient."""
    device = grads[0].device if grads else torch.device("cpu")
    local = any(not torch.isfinite(grad).all() for grad in grads)
    return any_rank(local, model_parallel_group, device)
