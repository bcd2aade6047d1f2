"""The optimizer of a model wrapped by FSDP (``core/distributed/fsdp.py``): AdamW (or SGD) on the sharded
fp32 parameters, the TP- and DP-aware grad norm it clips by, and its full (unsharded) state dict.

FSDP keeps the sharded parameters in fp32 (bf16 is a compute dtype, ``param_dtype``), so they are the
master weights: no loss scaling, and :class:`FSDPOptimizer` has the interface of ``MixedPrecisionOptimizer``.
The parameter groups follow Megatron (no weight decay on biases and 1-D parameters, by TP-local shape).
"""
from __future__ import annotations

from typing import Dict, List

import torch
from torch import nn

from core.distributed.fsdp import cpu_copy, fsdp_info, local_grad, named_fsdp_params
from core.optimizer.clip_grads import norm_squared_of_range
from core.optimizer.muon import Muon, orthogonalize_local, split_muon_groups, uses_muon
from core.optimizer.optimizer import LossScalingOptimizer, OptimizerConfig, build_qk_clip, build_torch_optimizer
from core.parallel_state import ParallelState
from core.tensor_parallel.mappings import all_reduce


@torch.no_grad()
def fsdp_grad_norm(model: nn.Module, state: ParallelState) -> float:
    """L2 norm of the full model's gradient from DP x CP shards: sums over the shard and MP groups."""
    info = fsdp_info(model)
    tp_group = state.tp_group
    total = torch.zeros((), dtype=torch.float32)
    device = None
    for name, param in named_fsdp_params(model):
        grad = local_grad(param)
        if grad is None or grad.numel() == 0:
            continue
        device = grad.device
        spec = info.specs[name]
        part = norm_squared_of_range(param, grad, spec.flat_start, tp_group.rank, tp_group.size, spec.shape)
        total = total.to(device) + part
    total = total.reshape(1).to(device or torch.device("cpu"))
    all_reduce(total, info.shard_group)
    all_reduce(total, state.group("mp"))
    return float(total.sqrt().item())


def fsdp_param_groups(model: nn.Module, muon: bool = False) -> List[Dict]:
    """Megatron's groups: no weight decay on biases and 1-D parameters (TP-local shapes); with ``muon`` the
    matrices Muon steps in groups of their own."""
    info = fsdp_info(model)
    decay, no_decay = [], []
    for name, param in named_fsdp_params(model):
        if not param.requires_grad:
            continue
        one_d = len(info.specs[name].shape) == 1
        (no_decay if name.endswith(".bias") or one_d else decay).append(param)
    groups = [{"params": decay, "wd_mult": 1.0, "lr_mult": 1.0},
              {"params": no_decay, "wd_mult": 0.0, "lr_mult": 1.0}]
    groups = [g for g in groups if g["params"]]
    if not muon:
        return groups
    names = {id(param): name for name, param in named_fsdp_params(model)}
    return split_muon_groups(groups, lambda p: uses_muon(names[id(p)], p, info.specs[names[id(p)]].shape))


class FSDPOptimizer(LossScalingOptimizer):
    """AdamW (or SGD) on the sharded fp32 parameters; the interface of MixedPrecisionOptimizer.

    FSDP keeps the sharded parameters in fp32 (bf16 is a compute dtype,
    ``param_dtype``), so they are the master weights. No loss scaling.
    """

    def __init__(self, model: nn.Module, config: OptimizerConfig, state: ParallelState) -> None:
        self.model, self.config, self.state = model, config, state
        self.optimizer = build_torch_optimizer(fsdp_param_groups(model, muon=config.optimizer == "muon"), config,
                                               allow_fused=False)
        self.qk_clip = build_qk_clip([model], config, state)
        if isinstance(self.optimizer, Muon):
            if fsdp_info(model).kind != "fsdp2":
                raise ValueError("--optimizer muon shards matrices with FSDP2 only; use --use-torch-fsdp2 instead of "
                                 "--use-torch-fsdp")
            self.optimizer.orthogonalize_batch = self._orthogonalize

    def _orthogonalize(self, params: List[torch.Tensor], updates: List[torch.Tensor]) -> List[torch.Tensor]:
        """Muon's directions: each update (a DTensor sharded over DP x CP) gathered into the TP-local tensor,
        orthogonalised, and this rank's flat window of it written back into the update's local shard."""
        info = fsdp_info(self.model)
        names = {id(param): name for name, param in named_fsdp_params(self.model)}
        for param, update in zip(params, updates):
            spec = info.specs[names[id(param)]]
            whole = update.full_tensor() if hasattr(update, "full_tensor") else update  # [TP-local shape]
            direction = orthogonalize_local(whole.view(spec.shape), spec.name, spec.meta, self.config.muon,
                                            self.state.tp_group)
            local = update.to_local() if hasattr(update, "to_local") else update
            window = direction.reshape(-1)[spec.flat_start:spec.flat_start + local.numel()]
            local.copy_(window.view_as(local))
        return updates

    def _attach_grads(self) -> List[torch.Tensor]:
        """The gradient shards FSDP left on the parameters (clipped in place)."""
        grads = (local_grad(p) for g in self.param_groups for p in g["params"])
        return [g for g in grads if g is not None and g.numel() > 0]

    def _grad_norm(self, grads: List[torch.Tensor]) -> float:
        return fsdp_grad_norm(self.model, self.state)

    def _drop_grads(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def _scale_rows(self, param: nn.Parameter, factors: torch.Tensor) -> None:
        """Scale the rows of ``param``'s DP shard (its flat window of whole rows of the TP-local tensor)."""
        info = fsdp_info(self.model)
        name = next(n for n, p in named_fsdp_params(self.model) if p is param)
        spec = info.specs[name]
        local = param.to_local() if hasattr(param, "to_local") else param
        columns = spec.numel // spec.shape[0]
        per_element = factors.to(local.dtype).repeat_interleave(columns)[spec.flat_start:spec.flat_start
                                                                           + local.numel()]
        local.detach().view(-1).mul_(per_element)

    def zero_grad(self) -> None:
        self._drop_grads()

    def state_dict(self) -> Dict:
        """This rank's sharded optimizer state (see :func:`full_optimizer_state_dict` for a full one)."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: Dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])

    def reload_model_params(self) -> None:
        """Nothing to do: the sharded parameters are the master weights."""



def full_optimizer_state_dict(model: nn.Module, optimizer: FSDPOptimizer, state: ParallelState) -> Dict:
    """The optimizer state with full (unsharded) tensors on ``dp_cp`` rank 0 (``{}`` elsewhere)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=False)
    full = get_optimizer_state_dict(model, optimizer.optimizer, options=options)
    if state.group("dp_cp").rank != 0:
        return {}
    return cpu_copy(full)


def load_full_optimizer_state_dict(model: nn.Module, optimizer: FSDPOptimizer, full: Dict) -> None:
    """Shard a full optimizer state dict (present on every rank) into the optimizer."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer.optimizer, _keyed_by_name(model, optimizer, full), options=options)


def _keyed_by_name(model: nn.Module, optimizer: FSDPOptimizer, full: Dict) -> Dict:
    """A checkpoint written without FSDP keys its parameters by position in the groups (torch's
    ``Optimizer.state_dict``); the same groups hold the same parameters in the same order here
    (:func:`fsdp_param_groups`), so each position becomes its parameter's name, as FSDP's keys are."""
    saved = [key for group in full["param_groups"] for key in group["params"]]
    if all(isinstance(key, str) for key in saved):
        return full
    names = {id(param): name for name, param in named_fsdp_params(model)}
    ours = [names[id(param)] for group in optimizer.optimizer.param_groups for param in group["params"]]
    if len(ours) != len(saved) or len(full["param_groups"]) != len(optimizer.optimizer.param_groups):
        raise RuntimeError(f"the optimizer state holds {len(saved)} parameters, this model trains {len(ours)}")
    rename = dict(zip(saved, ours))
    return {"state": {rename[key]: value for key, value in full["state"].items()},
            "param_groups": [{**group, "params": [rename[key] for key in group["params"]]}
                             for group in full["param_groups"]]}
