"""Adam (or SGD) on fp32 master weights, with loss scaling and clipping.

For an fp32 model the master weights are the model's own parameters. For a
bf16/fp16 model each parameter has an fp32 master copy that the optimizer
steps; the result is copied back into the model after each step. Gradients
come from ``param.main_grad`` (see core/distributed/grad_buffer.py).

Weight decay is decoupled (AdamW) and skipped for biases and other 1-D
parameters, as in Megatron; each param group carries ``wd_mult`` and
``lr_mult`` for the learning-rate scheduler.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from core.optimizer.clip_grads import any_non_finite, clip_grads, global_grad_norm
from core.optimizer.grad_scaler import ConstantGradScaler, DynamicGradScaler
from core.optimizer.muon import MUON_KEYS, Muon, MuonSettings, orthogonalize_local, split_muon_groups, uses_muon
from core.optimizer.precision_aware import PrecisionAwareAdamW
from core.optimizer.swap import MOMENTS, SwapAdamW
from core.parallel_state import ParallelState
from core.tensor_parallel.param_meta import copy_meta, param_meta
from core.transformer.qk_clip import QkClip

GradScaler = Union[ConstantGradScaler, DynamicGradScaler]


@dataclass
class OptimizerConfig:
    optimizer: str = "adam"
    lr: float = 1e-4
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-8
    sgd_momentum: float = 0.9
    clip_grad: float = 1.0
    swap_optimizer: bool = False  # Adam moments in host memory, streamed in chunks
    swap_chunk_elements: int = 1 << 24
    skip_non_finite_grad_norm: bool = True  # a NaN/Inf grad norm skips the update [--check-for-nan-in-loss-and-grad]
    muon: MuonSettings = MuonSettings()  # --optimizer muon: the --muon-* flags
    qk_clip_threshold: Optional[float] = None  # --qk-clip: rescale q/k projections past this logit after each step
    qk_clip_alpha: float = 0.5  # --qk-clip-alpha
    # --use-precision-aware-optimizer (distributed optimizer only; core/optimizer/precision_aware.py)
    use_precision_aware_optimizer: bool = False
    main_params_dtype: torch.dtype = torch.float32  # the master copies of bf16/fp16 weights
    exp_avg_dtype: torch.dtype = torch.float32
    exp_avg_sq_dtype: torch.dtype = torch.float32


def no_weight_decay(name: str, param: torch.Tensor) -> bool:
    """Megatron's rule: biases and other 1-D parameters (norm weights) get no weight decay."""
    return name.endswith(".bias") or param.dim() == 1


def param_groups(models: List[nn.Module], muon: bool = False) -> List[Dict]:
    """Decay and no-decay groups, with the multipliers the lr scheduler reads; with ``muon`` the matrices Muon
    steps in groups of their own."""
    decay, no_decay, names = [], [], {}
    for model in models:
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if no_weight_decay(name, param) else decay).append(param)
            names[id(param)] = name
    groups = [{"params": decay, "wd_mult": 1.0, "lr_mult": 1.0},
              {"params": no_decay, "wd_mult": 0.0, "lr_mult": 1.0}]
    groups = [g for g in groups if g["params"]]
    return split_muon_groups(groups, lambda p: uses_muon(names[id(p)], p)) if muon else groups


def state_keys(optimizer: str, name: str, param: torch.Tensor,
               shape: Optional[Sequence[int]] = None) -> Tuple[str, ...]:
    """The per-element state tensors ``--optimizer`` keeps for parameter ``name`` (besides its step count;
    ``shape``: its TP-local shape when ``param`` is a flat shard): a momentum for SGD and Muon's matrices, AdamW's
    two moments otherwise. From the parameter alone, so every rank answers alike, pieces held or not."""
    if optimizer == "sgd" or (optimizer == "muon" and uses_muon(name, param, shape)):
        return MUON_KEYS
    return MOMENTS


def flat_fp32_copies(tensors: List[torch.Tensor], dtype: torch.dtype = torch.float32) -> List[nn.Parameter]:
    """fp32 (or ``dtype``: --main-params-dtype fp16) copies of ``tensors`` as parameters that are consecutive views
    of one flat buffer.

    The master weights live contiguously, in the order given (the gradient buffer's), so an optimizer
    step streams through one allocation instead of one per tensor.
    """
    flat = torch.empty(sum(t.numel() for t in tensors), dtype=dtype,
                       device=tensors[0].device if tensors else None)  # [all elements]
    copies, offset = [], 0
    for tensor in tensors:
        view = flat[offset:offset + tensor.numel()].view(tensor.shape)
        view.copy_(tensor.detach())
        copies.append(nn.Parameter(view))
        offset += tensor.numel()
    return copies


def _master_copies(params: List[nn.Parameter]) -> List[nn.Parameter]:
    """fp32 copies of parameters in one flat buffer, with their metadata (the grad norm reads it)."""
    return [copy_meta(param, master) for param, master in zip(params, flat_fp32_copies(params))]


def build_torch_optimizer(groups: List[Dict], config: OptimizerConfig, allow_fused: bool = True,
                          distributed: bool = False) -> torch.optim.Optimizer:
    """SGD, AdamW (fused kernel when the device has one and ``allow_fused``), SwapAdamW, Muon (``groups`` from
    :func:`param_groups` with ``muon=True`` or :func:`~core.optimizer.muon.split_muon_groups`) or, for the
    distributed optimizer (``distributed``), PrecisionAwareAdamW."""
    if config.use_precision_aware_optimizer:
        return _precision_aware(groups, config, distributed)
    if config.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=config.lr, momentum=config.sgd_momentum,
                               weight_decay=config.weight_decay)
    if config.optimizer not in ("adam", "muon"):
        raise ValueError(f"--optimizer {config.optimizer!r} is not one of ('adam', 'sgd', 'muon')")
    kwargs = dict(lr=config.lr, betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_eps,
                  weight_decay=config.weight_decay)
    if config.optimizer == "muon":
        return Muon(groups, settings=config.muon, **kwargs)
    if config.swap_optimizer:
        return SwapAdamW(groups, chunk_elements=config.swap_chunk_elements, **kwargs)
    if not allow_fused:  # e.g. DTensor parameters (FSDP2)
        return torch.optim.AdamW(groups, **kwargs)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)
    except (RuntimeError, ValueError):  # fused kernel unavailable for this device/dtype
        return torch.optim.AdamW(groups, foreach=True, **kwargs)


def build_qk_clip(models: List[nn.Module], config: OptimizerConfig, state: ParallelState) -> Optional[QkClip]:
    """--qk-clip's clipping over ``models``' attention (None without it)."""
    if config.qk_clip_threshold is None:
        return None
    return QkClip(models, config.qk_clip_threshold, config.qk_clip_alpha, state.group("dp_cp"), state.tp_group)


def _precision_aware(groups: List[Dict], config: OptimizerConfig, distributed: bool) -> PrecisionAwareAdamW:
    if not distributed or config.optimizer != "adam":
        raise ValueError("--use-precision-aware-optimizer needs --use-distributed-optimizer and --optimizer adam")
    return PrecisionAwareAdamW(groups, lr=config.lr, betas=(config.adam_beta1, config.adam_beta2),
                               eps=config.adam_eps, weight_decay=config.weight_decay,
                               exp_avg_dtype=config.exp_avg_dtype, exp_avg_sq_dtype=config.exp_avg_sq_dtype)


class LossScalingOptimizer:
    """What every optimizer of the suite shares: the torch optimizer's groups, loss scaling and
    the template of :meth:`step`.

    A subclass provides the hooks: :meth:`_attach_grads` (the fp32 gradients the
    torch optimizer steps with), :meth:`_found_non_finite` (only with a scaler),
    :meth:`_grad_norm`, :meth:`_drop_grads`, :meth:`_scale_rows` (``--qk-clip``'s rescaling of
    master weights) and :meth:`_publish_params` (write the updated master weights into the model /
    gather them).
    """

    optimizer: torch.optim.Optimizer
    config: OptimizerConfig
    grad_scaler: Optional[GradScaler] = None
    qk_clip: Optional[QkClip] = None

    @torch.no_grad()
    def step(self) -> Tuple[bool, Optional[float]]:
        """One update. Returns (applied, grad norm); an fp16 step with inf/nan grads is skipped."""
        try:
            return self._step()
        finally:
            if self.qk_clip is not None:  # a skipped step's records go too
                self.qk_clip.reset()

    def _step(self) -> Tuple[bool, Optional[float]]:
        grads = self._attach_grads()
        if self.grad_scaler is not None:
            torch._foreach_mul_(grads, 1.0 / self.grad_scaler.scale)
            found_inf = self._found_non_finite(grads)
            self.grad_scaler.update(found_inf)
            if found_inf:
                self._drop_grads()
                return False, None
        norm = self._grad_norm(grads)
        if self.config.skip_non_finite_grad_norm and not math.isfinite(norm):  # every rank sees the global norm
            self._drop_grads()
            return False, norm
        clip_grads(grads, norm, self.config.clip_grad)
        self.optimizer.step()
        self._drop_grads()
        if self.qk_clip is not None:  # MuonClip: after the update, before the model sees the weights
            for param, factors in self.qk_clip.factors():
                self._scale_rows(param, factors)
        self._publish_params()
        return True, norm

    def _attach_grads(self) -> List[torch.Tensor]:
        raise NotImplementedError

    def _found_non_finite(self, grads: List[torch.Tensor]) -> bool:
        raise NotImplementedError(f"{type(self).__name__} does not support loss scaling")

    def _grad_norm(self, grads: List[torch.Tensor]) -> float:
        raise NotImplementedError

    def _drop_grads(self) -> None:
        raise NotImplementedError

    def _publish_params(self) -> None:
        """Nothing to publish by default: the stepped parameters are the model's."""

    def _scale_rows(self, param: nn.Parameter, factors: torch.Tensor) -> None:
        """Multiply each TP-local row of model parameter ``param``'s master weight by ``factors`` [rows]."""
        raise NotImplementedError(f"{type(self).__name__} does not support --qk-clip")

    @property
    def param_groups(self) -> List[Dict]:
        """The torch optimizer's groups, looked up each time (load_state_dict replaces the list)."""
        return self.optimizer.param_groups

    @property
    def loss_scale(self) -> float:
        return self.grad_scaler.scale if self.grad_scaler is not None else 1.0

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.loss_scale if self.grad_scaler is not None else loss

    # ---- layout-independent checkpoints (core/dist_checkpointing.py) ---------------------------
    def scalars(self) -> Dict:
        """What is not per parameter: the step count, the groups' settings and the loss scaler."""
        steps = [float(state["step"]) for state in self.optimizer.state.values() if "step" in state]
        result = {"step": max(steps) if steps else 0.0,
                  "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in self.optimizer.param_groups]}
        if self.grad_scaler is not None:
            result["grad_scaler"] = self.grad_scaler.state_dict()
        return result

    def load_scalars(self, scalars: Dict) -> None:
        if self.grad_scaler is not None and "grad_scaler" in scalars:
            self.grad_scaler.load_state_dict(scalars["grad_scaler"])
        for group, saved in zip(self.optimizer.param_groups, scalars.get("param_groups", [])):
            group.update({k: v for k, v in saved.items() if k in group and k != "params"})


class MixedPrecisionOptimizer(LossScalingOptimizer):
    """Steps fp32 master weights from ``main_grad`` and writes them back to the model."""

    def __init__(self, models: List[nn.Module], config: OptimizerConfig, state: ParallelState,
                 grad_scaler: Optional[GradScaler] = None) -> None:
        self.config, self.state, self.grad_scaler = config, state, grad_scaler
        groups = param_groups(models, muon=config.optimizer == "muon")
        self.model_params: List[nn.Parameter] = [p for g in groups for p in g["params"]]
        self.mixed = any(p.dtype != torch.float32 for p in self.model_params)
        if self.mixed:
            masters = iter(_master_copies(self.model_params))
            for group in groups:
                group["params"] = [next(masters) for _ in group["params"]]
        self.master_params: List[nn.Parameter] = [p for g in groups for p in g["params"]]
        self.optimizer = build_torch_optimizer(groups, config)
        self.qk_clip = build_qk_clip(models, config, state)
        if isinstance(self.optimizer, Muon):
            names = {id(p): name for model in models for name, p in model.named_parameters()}
            self._names = {id(m): names[id(p)] for p, m in zip(self.model_params, self.master_params)}
            self.optimizer.orthogonalize_batch = self._orthogonalize

    def _orthogonalize(self, masters: List[torch.Tensor], updates: List[torch.Tensor]) -> List[torch.Tensor]:
        """Muon's directions: each master is this TP rank's whole slice of its parameter."""
        return [orthogonalize_local(update, self._names[id(master)], param_meta(master), self.config.muon,
                                    self.state.tp_group) for master, update in zip(masters, updates)]

    def _attach_grads(self) -> List[torch.Tensor]:
        grads = []
        for model_param, master in zip(self.model_params, self.master_params):
            grad = model_param.main_grad
            master.grad = grad if grad.dtype == torch.float32 else grad.float()
            grads.append(master.grad)
        return grads

    def _found_non_finite(self, grads: List[torch.Tensor]) -> bool:
        return any_non_finite(grads, self.state.group("mp"))

    def _grad_norm(self, grads: List[torch.Tensor]) -> float:
        return global_grad_norm(self.master_params, grads, self.state.tp_group, self.state.group("mp"),
                                self.state.groups.get("ep"))

    def _drop_grads(self) -> None:
        for master in self.master_params:
            master.grad = None

    def _publish_params(self) -> None:
        if self.mixed:
            torch._foreach_copy_([p.data for p in self.model_params], [m.data for m in self.master_params])

    def _scale_rows(self, param: nn.Parameter, factors: torch.Tensor) -> None:
        index = next(i for i, p in enumerate(self.model_params) if p is param)
        master = self.master_params[index]
        master.mul_(factors.to(master.dtype).view(-1, *([1] * (master.dim() - 1))))

    def state_dict(self) -> Dict:
        result = {"optimizer": self.optimizer.state_dict()}
        if self.grad_scaler is not None:
            result["grad_scaler"] = self.grad_scaler.state_dict()
        if self.mixed:
            result["fp32_from_fp16_params"] = [m.detach().clone() for m in self.master_params]
        return result

    @torch.no_grad()
    def load_state_dict(self, state: Dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.grad_scaler is not None and "grad_scaler" in state:
            self.grad_scaler.load_state_dict(state["grad_scaler"])
        if self.mixed:
            saved = state.get("fp32_from_fp16_params")
            if saved is None:  # checkpoint from an fp32 run: master weights are the model's
                saved = [p.float() for p in self.model_params]
            for master, value in zip(self.master_params, saved):
                master.copy_(value)

    def named_states(self, names: Dict[int, str]) -> Dict[str, Dict[str, torch.Tensor]]:
        """Per parameter (by ``names[id(model param)]``): its optimizer state tensors, and ``fp32_param``
        (the master weight) when the model is bf16/fp16."""
        result = {}
        for param, master in zip(self.model_params, self.master_params):
            entries = {k: v.detach() for k, v in self.optimizer.state.get(master, {}).items()
                       if k != "step" and torch.is_tensor(v)}
            if self.mixed:
                entries["fp32_param"] = master.detach()
            result[names[id(param)]] = entries
        return result

    @torch.no_grad()
    def load_named_states(self, names: Dict[int, str], states: Dict[str, Dict[str, torch.Tensor]],
                          scalars: Dict) -> None:
        """The inverse of :meth:`named_states` (the model weights are loaded already)."""
        per_index = {}
        for index, (param, master) in enumerate(zip(self.model_params, self.master_params)):
            saved = dict(states[names[id(param)]])
            fp32 = saved.pop("fp32_param", None)
            if self.mixed:
                master.copy_(fp32 if fp32 is not None else param.float())
            if saved:
                per_index[index] = {"step": torch.tensor(float(scalars["step"])), **saved}
        current = self.optimizer.state_dict()
        self.optimizer.load_state_dict({"state": per_index, "param_groups": current["param_groups"]})
        self.load_scalars(scalars)

    def reload_model_params(self) -> None:
        """Refresh master weights from the model (after loading model weights only)."""
        if self.mixed:
            with torch.no_grad():
                for master, param in zip(self.master_params, self.model_params):
                    master.copy_(param.float())


def build_grad_scaler(fp16: bool, loss_scale: Optional[float], initial_loss_scale: float, min_loss_scale: float,
                      loss_scale_window: int, hysteresis: int) -> Optional[GradScaler]:
    """The scaler for fp16 (static when ``--loss-scale`` is given); None otherwise."""
    if not fp16:
        return None
    if loss_scale:
        return ConstantGradScaler(loss_scale)
    return DynamicGradScaler(initial_loss_scale, min_loss_scale, growth_interval=loss_scale_window,
                             hysteresis=hysteresis)
