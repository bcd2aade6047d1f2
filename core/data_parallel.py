"""One interface for a rank's model chunks under data parallelism: our DDP or PyTorch's FSDP.

The trainer never asks which one it holds. :class:`DataParallelModels` owns the
model chunks, the optimizer and whatever keeps their gradients (our bucketed
fp32 buffers, or FSDP's sharded gradients), and answers the questions a
training step and a checkpoint ask:

    dp = DDPModels(chunks, DDPOptions(...), state, optimizer_config, grad_scaler)
    dp.zero_grad()                       # before the step's first micro-batch
    with dp.no_sync(): ...               # backward passes that must not start reductions
    dp.finalize_grads()                  # DP (and TP / embedding) sums after the last backward
    applied, norm = dp.optimizer.step()
    dp.model_state(), dp.load_model_state(checkpoint)          # Megatron's ``model`` entries
    dp.optimizer_state(), dp.extra_checkpoint_files(), dp.load_optimizer_state(checkpoint, directory)

``model_state``, ``optimizer_state`` and ``extra_checkpoint_files`` may be
collective over the DP group (FSDP gathers its shards, the distributed optimizer
gathers its pieces): every rank calls them.
"""
from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from core import checkpointing
from core.distributed.fsdp import (clean_name, finalize_fsdp_grads, fsdp_info, fsdp_no_sync, full_model_state_dict,
                                   load_full_model_state_dict, named_fsdp_params, wrap_fsdp1, wrap_fsdp2)
from core.distributed.grad_buffer import GradBuffers, finalize_model_grads
from core.optimizer.distrib_optimizer import DistributedOptimizer
from core.optimizer.fsdp_optimizer import FSDPOptimizer, full_optimizer_state_dict, load_full_optimizer_state_dict
from core.optimizer.optimizer import (GradScaler, LossScalingOptimizer, MixedPrecisionOptimizer, OptimizerConfig,
                                      state_keys)
from core.parallel_state import ParallelState
from core.tensor_parallel.param_meta import ParamMeta, param_meta


class DataParallelModels(ABC):
    """Model chunks, their optimizer and their gradient synchronisation (see the module docstring)."""

    models: List[nn.Module]
    optimizer: LossScalingOptimizer

    @property
    def distributed_optimizer(self) -> bool:
        """Whether the optimizer state is sharded over DP with Megatron's ``distrib_optim.pt`` beside it."""
        return False

    @abstractmethod
    def zero_grad(self) -> None:
        """Forget the previous step's gradients."""

    @abstractmethod
    def no_sync(self) -> contextlib.AbstractContextManager:
        """Backward passes inside accumulate gradients without starting any DP reduction."""

    @abstractmethod
    def finalize_grads(self) -> None:
        """Finish every gradient reduction (DP, and the TP sums the layers leave to the end)."""

    def finish_param_sync(self) -> None:
        """Weights complete on every rank (an overlapped all-gather may still be in flight)."""

    @abstractmethod
    def model_state(self, trainable_only: bool = False) -> Dict[str, Any]:
        """Megatron's ``model`` (or ``model0``, ``model1``, ...) checkpoint entries (``trainable_only``: without
        the frozen parameters, as LoRA's adapter checkpoints)."""

    @abstractmethod
    def load_model_state(self, checkpoint: Dict[str, Any]) -> None:
        """Load the model entries; RuntimeError or KeyError when they do not fit."""

    @abstractmethod
    def optimizer_state(self) -> Dict[str, Any]:
        """The checkpoint's ``optimizer`` entry."""

    def extra_checkpoint_files(self) -> Dict[str, Any]:
        """Files written beside the rank's checkpoint file (by DP rank 0), name -> content."""
        return {}

    @abstractmethod
    def load_optimizer_state(self, checkpoint: Dict[str, Any], directory: str) -> None:
        """Restore the optimizer from a checkpoint (and the files beside it in ``directory``)."""

    def reload_model_params(self) -> None:
        """Refresh master weights from the model after loading model weights only."""
        self.optimizer.reload_model_params()

    # ---- layout-independent checkpoints (core/dist_checkpointing.py) ---------------------------
    @abstractmethod
    def local_tensors(self) -> Dict[str, TensorSpec]:
        """What this rank holds of each checkpointed tensor (parameters and persistent buffers of every
        chunk, by name): TP- and EP-local, whole over DP."""

    @abstractmethod
    def named_weights(self) -> Dict[str, torch.Tensor]:
        """The tensors of :meth:`local_tensors`, by name (collective: FSDP gathers; ranks that do not keep the
        gathered copy return ``{}``)."""

    @abstractmethod
    def load_named_weights(self, weights: Dict[str, torch.Tensor]) -> None:
        """Load every tensor of :meth:`local_tensors` (RuntimeError or KeyError when they do not fit)."""

    @abstractmethod
    def named_optimizer_states(self) -> Dict[str, Dict[str, torch.Tensor]]:
        """Per parameter name: ``exp_avg``, ``exp_avg_sq`` (or SGD's ``momentum_buffer``) and, for a bf16/fp16
        model, ``fp32_param``; TP-local, whole over DP (collective; ``{}`` where FSDP keeps no copy)."""

    @abstractmethod
    def load_named_optimizer_states(self, states: Dict[str, Dict[str, torch.Tensor]], scalars: Dict) -> None:
        """Restore the optimizer from :meth:`named_optimizer_states` and ``optimizer.scalars()``."""

    windowed_model = False  # the weights are sharded by flat ranges (FSDP2): model_windows, not named_weights
    windowed_optimizer = False  # the optimizer state is (the distributed optimizer, FSDP2): optimizer_windows

    def model_windows(self) -> List[Window]:
        """With ``windowed_model``: this rank's share of each parameter (kind ``model``), written and read
        without gathering; the persistent buffers go through :meth:`named_weights`."""
        raise NotImplementedError

    def model_window_targets(self) -> List[Window]:
        """The parameter shares a load fills in place (as :meth:`model_windows`)."""
        raise NotImplementedError

    def finish_model_windows(self, buffers: Dict[str, torch.Tensor]) -> None:
        """After the model window targets were filled: the buffers."""
        raise NotImplementedError

    def optimizer_windows(self) -> List[Window]:
        """With ``windowed_optimizer``: this rank's share of each parameter's optimizer state, so a checkpoint
        writes and reads it without gathering (else :meth:`named_optimizer_states`)."""
        raise NotImplementedError

    def optimizer_window_targets(self, kinds: List[str]) -> List[Window]:
        """The tensors a load of :meth:`optimizer_windows` fills in place."""
        raise NotImplementedError

    def finish_optimizer_windows(self, scalars: Dict, masters_loaded: bool) -> None:
        """After the window targets were filled (the step, settings, and a bf16/fp16 model's weights)."""
        raise NotImplementedError


Window = Tuple[str, Tuple[int, ...], int, Dict[str, torch.Tensor]]  # (name, param shape, flat start, {kind: flat})


@dataclass(frozen=True)
class TensorSpec:
    """A checkpointed tensor as this rank holds it."""

    shape: Tuple[int, ...]
    dtype: torch.dtype
    meta: ParamMeta
    trains: bool


def _tensor_specs(module: nn.Module, names: Iterator[Tuple[str, nn.Parameter]]) -> Dict[str, TensorSpec]:
    params = dict(names)
    specs = {}
    for name, value in module.state_dict(keep_vars=True).items():
        owner = params.get(name)
        specs[name] = TensorSpec(tuple(value.shape), value.dtype, param_meta(owner if owner is not None else value),
                                 owner is not None and owner.requires_grad)
    return specs


@dataclass
class DDPOptions:
    """Our data parallelism: fp32 (or fp16) bucketed gradient buffers and the optimizer over them."""

    grad_dtype: torch.dtype = torch.float32
    bucket_size: Optional[int] = None
    overlap_grad_reduce: bool = False
    use_distributed_optimizer: bool = False
    overlap_param_gather: bool = False


class DDPModels(DataParallelModels):
    """Model chunks with one :class:`GradBuffers` each; a mixed-precision or distributed optimizer."""

    def __init__(self, models: List[nn.Module], options: DDPOptions, state: ParallelState,
                 optimizer_config: OptimizerConfig, grad_scaler: Optional[GradScaler]) -> None:
        self.models, self.state = models, state
        # gradients are summed over CP (each CP rank's tokens give a share) and averaged over DP
        self.grad_buffers = [GradBuffers(m, grad_dtype=options.grad_dtype, dp_group=state.group("dp_cp"),
                                         expert_dp_group=state.group("expert_dp_cp"), divisor=state.dp,
                                         bucket_size=options.bucket_size,
                                         overlap_grad_reduce=options.overlap_grad_reduce,
                                         distributed_optimizer=options.use_distributed_optimizer)
                             for m in models]
        if options.use_distributed_optimizer:
            self.optimizer = DistributedOptimizer(models, self.grad_buffers, optimizer_config, state, grad_scaler,
                                                  overlap_param_gather=options.overlap_param_gather)
        else:
            self.optimizer = MixedPrecisionOptimizer(models, optimizer_config, state, grad_scaler)

    @property
    def distributed_optimizer(self) -> bool:
        return isinstance(self.optimizer, DistributedOptimizer)

    def zero_grad(self) -> None:
        for buffers in self.grad_buffers:
            buffers.zero()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for buffers in self.grad_buffers:
                stack.enter_context(buffers.no_sync())
            yield

    def finalize_grads(self) -> None:
        finalize_model_grads(self.models, self.grad_buffers, self.state)

    def finish_param_sync(self) -> None:
        if self.distributed_optimizer:
            self.optimizer.finish_param_sync()

    def model_state(self, trainable_only: bool = False) -> Dict[str, Any]:
        entries = checkpointing.model_state_dicts(self.models)
        if not trainable_only:
            return entries
        frozen = [{n for n, p in m.named_parameters() if not p.requires_grad} for m in self.models]
        return {key: {n: v for n, v in entry.items() if n not in skip}
                for (key, entry), skip in zip(entries.items(), frozen)}

    def load_model_state(self, checkpoint: Dict[str, Any]) -> None:
        checkpointing.load_model_state_dicts(self.models, checkpoint)

    def optimizer_state(self) -> Dict[str, Any]:
        return self.optimizer.state_dict()

    def extra_checkpoint_files(self) -> Dict[str, Any]:
        if not self.distributed_optimizer:
            return {}
        return {checkpointing.DISTRIB_OPTIM_FILENAME: self.optimizer.sharded_state()}  # collective over DP

    def local_tensors(self) -> Dict[str, TensorSpec]:
        return {name: spec for model in self.models for name, spec in _tensor_specs(model, model.named_parameters()).items()}

    def named_weights(self) -> Dict[str, torch.Tensor]:
        return {name: value.detach() for model in self.models for name, value in model.state_dict().items()}

    def load_named_weights(self, weights: Dict[str, torch.Tensor]) -> None:
        entries = checkpointing.model_state_dicts(self.models)
        self.load_model_state({key: {name: weights[name] for name in entry} for key, entry in entries.items()})

    def _param_names(self) -> Dict[int, str]:
        return {id(param): name for model in self.models for name, param in model.named_parameters()}

    def named_optimizer_states(self) -> Dict[str, Dict[str, torch.Tensor]]:
        return self.optimizer.named_states(self._param_names())  # (the distributed optimizer: optimizer_windows)

    @property
    def windowed_optimizer(self) -> bool:
        return self.distributed_optimizer

    def optimizer_windows(self) -> List[Window]:
        return self.optimizer.windows()

    def optimizer_window_targets(self, kinds: List[str]) -> List[Window]:
        return self.optimizer.window_targets(kinds)

    def finish_optimizer_windows(self, scalars: Dict, masters_loaded: bool) -> None:
        self.optimizer.finish_window_load(scalars, masters_loaded)

    def load_named_optimizer_states(self, states: Dict[str, Dict[str, torch.Tensor]], scalars: Dict) -> None:
        self.optimizer.load_named_states(self._param_names(), states, scalars)

    def load_optimizer_state(self, checkpoint: Dict[str, Any], directory: str) -> None:
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if self.distributed_optimizer:
            shards = os.path.join(directory, checkpointing.DISTRIB_OPTIM_FILENAME)
            self.optimizer.load_sharded_state(checkpointing.load_file(shards))


@dataclass
class FSDPOptions:
    """PyTorch's FSDP over our DP x CP ranks: ``fsdp2`` (fully_shard) or ``fsdp1`` (FullyShardedDataParallel)."""

    kind: str = "fsdp2"
    bf16: bool = False
    hsdp_replicate: int = 1


class FSDPModels(DataParallelModels):
    """One fp32 model sharded over DP x CP by PyTorch's FSDP (bf16 as its compute dtype); no pipeline chunks.

    Under CP its gradients are summed over CP and averaged over DP, as DDP's (see core/distributed/fsdp.py).
    """

    def __init__(self, model: nn.Module, options: FSDPOptions, state: ParallelState,
                 optimizer_config: OptimizerConfig) -> None:
        self.state = state
        self.model = _wrap_fsdp(model, options, state)
        self.models = [self.model]
        self.optimizer = FSDPOptimizer(self.model, optimizer_config, state)

    def zero_grad(self) -> None:
        self.optimizer.zero_grad()

    def no_sync(self) -> contextlib.AbstractContextManager:
        return fsdp_no_sync(self.model)

    def finalize_grads(self) -> None:
        finalize_fsdp_grads(self.model, self.state)

    def model_state(self, trainable_only: bool = False) -> Dict[str, Any]:
        return {"model": full_model_state_dict(self.model, self.state, trainable_only=trainable_only)}  # collective

    def load_model_state(self, checkpoint: Dict[str, Any]) -> None:
        load_full_model_state_dict(self.model, checkpoint["model"])

    def optimizer_state(self) -> Dict[str, Any]:
        return {"optimizer": full_optimizer_state_dict(self.model, self.optimizer, self.state)}  # collective

    def load_optimizer_state(self, checkpoint: Dict[str, Any], directory: str) -> None:
        load_full_optimizer_state_dict(self.model, self.optimizer, checkpoint["optimizer"]["optimizer"])

    def local_tensors(self) -> Dict[str, TensorSpec]:
        """From the shapes recorded before wrapping (FSDP1's parameters are flat shards now), and the buffers
        (not sharded) that the state dict holds."""
        params = dict(named_fsdp_params(self.model))
        specs = {name: TensorSpec(tuple(spec.shape), params[name].dtype, spec.meta, params[name].requires_grad)
                 for name, spec in fsdp_info(self.model).specs.items()}
        for module_name, module in self.model.named_modules():
            for name, buffer in module.named_buffers(recurse=False):
                if buffer is not None and name not in module._non_persistent_buffers_set:
                    full = clean_name(f"{module_name}.{name}" if module_name else name)
                    specs[full] = TensorSpec(tuple(buffer.shape), buffer.dtype, param_meta(buffer), False)
        return specs

    def load_named_weights(self, weights: Dict[str, torch.Tensor]) -> None:
        load_full_model_state_dict(self.model, weights)

    @property
    def windowed_model(self) -> bool:  # FSDP2's DTensor shards are row ranges of the TP-local tensors
        return fsdp_info(self.model).kind == "fsdp2"

    windowed_optimizer = windowed_model

    def _shares(self) -> Iterator[Tuple[str, nn.Parameter, Tuple[int, ...], int]]:
        """(name, parameter, TP-local shape, flat start of this rank's share) of every parameter."""
        specs = fsdp_info(self.model).specs
        for name, param in named_fsdp_params(self.model):
            spec = specs[name]
            yield name, param, tuple(spec.shape), spec.flat_start if isinstance(param, DTensor) else 0

    def model_windows(self) -> List[Window]:
        return [(name, shape, start, {"model": _local(param).detach().reshape(-1)})
                for name, param, shape, start in self._shares()]

    def model_window_targets(self) -> List[Window]:
        return self.model_windows()  # the shares themselves, filled in place

    def finish_model_windows(self, buffers: Dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, buffer in self.model.named_buffers():
                if clean_name(name) in buffers:
                    buffer.copy_(buffers[clean_name(name)])

    def optimizer_windows(self) -> List[Window]:
        windows = []
        for name, param, shape, start in self._shares():
            state = self.optimizer.optimizer.state.get(param, {})
            entries = {kind: _local(value).detach().reshape(-1) for kind, value in state.items()
                       if kind != "step" and torch.is_tensor(value)}
            if param.requires_grad:
                windows.append((name, shape, start, entries))
        return windows

    def optimizer_window_targets(self, kinds: List[str]) -> List[Window]:
        windows = []
        for name, param, shape, start in self._shares():
            if not param.requires_grad:
                continue
            state = self.optimizer.optimizer.state[param]
            entries = {}
            for kind in kinds:
                # FSDP's parameters are the fp32 masters, loaded as the model; each parameter takes its own moments
                if kind != "fp32_param" and kind in state_keys(self.optimizer.config.optimizer, name, param, shape):
                    state[kind] = torch.zeros_like(param.detach())
                    entries[kind] = _local(state[kind]).reshape(-1)
            windows.append((name, shape, start, entries))
        return windows

    def finish_optimizer_windows(self, scalars: Dict, masters_loaded: bool) -> None:
        step = torch.tensor(float(scalars.get("step", 0.0)))
        for group in self.optimizer.param_groups:
            for param in group["params"]:
                self.optimizer.optimizer.state[param]["step"] = step.clone()
        self.optimizer.load_scalars(scalars)

    def named_weights(self) -> Dict[str, torch.Tensor]:
        if self.windowed_model:  # the parameters go as windows: the persistent buffers (not sharded)
            names = set(self.local_tensors()) - {name for name, _ in named_fsdp_params(self.model)}
            return {clean_name(n): b.detach() for n, b in self.model.named_buffers() if clean_name(n) in names}
        return full_model_state_dict(self.model, self.state)  # collective; dp_cp rank 0 keeps it

    def named_optimizer_states(self) -> Dict[str, Dict[str, torch.Tensor]]:
        full = full_optimizer_state_dict(self.model, self.optimizer, self.state)  # collective
        return {clean_name(name): {k: v for k, v in entries.items() if k != "step" and torch.is_tensor(v)}
                for name, entries in full.get("state", {}).items()}

    def load_named_optimizer_states(self, states: Dict[str, Dict[str, torch.Tensor]], scalars: Dict) -> None:
        names = {id(param): name for name, param in named_fsdp_params(self.model)}
        step = torch.tensor(float(scalars["step"]))
        groups = [{**{k: v for k, v in group.items() if k != "params"},
                   "params": [names[id(p)] for p in group["params"]]} for group in self.optimizer.param_groups]
        full = {"state": {name: {"step": step.clone(), **{k: v for k, v in states[name].items() if k != "fp32_param"}}
                          for group in groups for name in group["params"]},
                "param_groups": groups}
        load_full_optimizer_state_dict(self.model, self.optimizer, full)
        self.optimizer.load_scalars(scalars)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's shard of a DTensor (the tensor itself otherwise)."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _wrap_fsdp(model: nn.Module, options: FSDPOptions, state: ParallelState) -> nn.Module:
    from torch.distributed.fsdp import MixedPrecision

    if options.kind == "fsdp2":
        return wrap_fsdp2(model, state, param_dtype=torch.bfloat16 if options.bf16 else None,
                          hsdp_replicate=options.hsdp_replicate)
    precision = MixedPrecision(torch.bfloat16, torch.float32) if options.bf16 else None
    strategy = "HYBRID_SHARD" if options.hsdp_replicate > 1 else "FULL_SHARD"
    return wrap_fsdp1(model, state, mixed_precision=precision, sharding_strategy=strategy,
                      hsdp_replicate=options.hsdp_replicate)
