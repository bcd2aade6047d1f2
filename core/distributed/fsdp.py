"""Fully sharded data parallelism with PyTorch's FSDP, composed with our tensor parallelism.

Two wrappers, both PyTorch's own implementations:

- :func:`wrap_fsdp2`: ``torch.distributed.fsdp.fully_shard`` on every transformer
  layer that has parameters, then on the root, over a ``DeviceMesh`` built
  from our ``dp_cp`` group (with ``hsdp_replicate > 1`` a 2-D
  ``(replicate, shard)`` mesh over those ranks: HSDP).
- :func:`wrap_fsdp1`: ``FullyShardedDataParallel`` (``use_orig_params=True``),
  one unit per transformer layer plus the root, over the ``dp_cp`` group (or a
  ``(shard, replicate)`` pair of groups for ``HYBRID_SHARD``).

Context parallelism (as Megatron does): the parameters are sharded over the
DP x CP ranks (``dp_cp``; the DP group itself when CP = 1). Each CP rank's
loss carries only its tokens' share of the sequence mean, so the gradient is
*summed* over CP and averaged over DP: the reduction divides by DP, not by the
DP x CP ranks it runs over. FSDP2 is told so (``set_gradient_divide_factor``
with sum-only collectives); FSDP1 has no such setting, so
:func:`finalize_fsdp_grads` multiplies its mean over ``dp_cp`` by CP.
Everything after the reduction (grad norm, clipping, full state dicts) treats
``dp_cp`` as it treats the DP group without CP.

Our TP parameters are plain tensors holding this TP rank's slice; FSDP shards
those local tensors further over DP. Every TP rank of a DP position holds
tensors of the same local shape, so FSDP cuts them at the same places and
each rank's DP shard covers the same *flat window* ``[start, start + n)`` of
its TP-local tensor. That is what makes the two TP gradient sums FSDP knows
nothing about correct on shards (both read the parameter's ``ParamMeta``,
recorded before wrapping and put back on the wrapped parameters):

- gradients that are partial sums over TP (``grad_partial_over_tp``: norms and
  row-parallel biases under sequence parallelism): the local shards are
  all-reduced over TP, element by element;
- replicated KV heads: inside the window, the elements of each replicated
  segment are summed over the TP ranks that hold the same head
  (:func:`~core.tensor_parallel.param_meta.sum_replicas_over_tp`, the helper DDP uses
  with the whole tensor as the window).

LoRA (``core/tensor_parallel/lora.py``): frozen parameters (``requires_grad`` False) are sharded
like the others but get no gradient, no optimizer state and no part in the grad norm. Each layer's
adapter factors (``lora_A`` / ``lora_B`` modules, called in the forward) form their own unit inside the
layer's, with no ``param_dtype`` (FSDP1: no ``mixed_precision``), so under ``--bf16`` they gather,
compute, reduce and step in fp32 while the base weights compute in bf16. A base checkpoint without
adapters loads with ``load_full_model_state_dict(..., strict=False)``, which reports what it left alone.

Expert parameters (``ParamMeta.is_expert``) are refused for now: they need a mesh
over the expert-DP group.

Training step (see ``tests/distributed/test_fsdp.py``)::

    model = wrap_fsdp2(build_model(config, state, device, seed), state)
    optimizer = FSDPOptimizer(model, OptimizerConfig(...), state)  # core/optimizer/fsdp_optimizer.py
    loss.backward()                       # FSDP reduce-scatters over DP x CP (sum / DP)
    finalize_fsdp_grads(model, state)     # TP sums on the shards (and FSDP1's CP factor)
    applied, grad_norm = optimizer.step() # TP/DP-aware norm, clipping, AdamW

Checkpoints keep Megatron's layout: :func:`full_model_state_dict` gathers the
TP-local (DP-unsharded) state dict on ``dp_cp`` rank 0 of each TP rank, equal to the
``model`` entry written without FSDP; :func:`load_full_model_state_dict`
shards it back. Loss scaling (fp16) is not supported; bf16 runs through
``param_dtype`` with fp32 sharded master parameters and fp32 gradient
reduction.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Shard, distribute_tensor

from core.parallel_state import GROUP_DIMS, Group, ParallelState, group_ranks
from core.tensor_parallel.mappings import all_reduce
from core.tensor_parallel.param_meta import ParamMeta, param_meta, set_meta, sum_replicas_over_tp
from core.transformer.block import transformer_layers

SHARDING_STRATEGIES = ("FULL_SHARD", "HYBRID_SHARD", "SHARD_GRAD_OP", "NO_SHARD")
_FSDP1_PREFIXES = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")


# --------------------------------------------------------------------------- bookkeeping

@dataclass
class ParamSpec:
    """What a parameter was before FSDP: TP-local shape, its metadata, and its DP window."""

    name: str
    shape: torch.Size
    meta: ParamMeta
    flat_start: int = 0  # offset of this rank's DP shard in the flattened TP-local tensor

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class FSDPInfo:
    """How a model was wrapped; kept on the model as ``model.fsdp_info``."""

    kind: str  # "fsdp2" or "fsdp1"
    shard_group: Group  # ranks a gradient is sharded over
    replicate_group: Group  # ranks holding the same shard (HSDP / HYBRID_SHARD)
    specs: Dict[str, ParamSpec] = field(default_factory=dict)
    grad_post_scale: float = 1.0  # FSDP1 under CP: its dp_cp mean times CP is the sum over CP, mean over DP


def clean_name(name: str) -> str:
    """A parameter name without FSDP1's wrapper prefixes (FSDP2 adds none)."""
    for prefix in _FSDP1_PREFIXES:
        name = name.replace(prefix, "")
    return name


def fsdp_info(model: nn.Module) -> FSDPInfo:
    info = getattr(model, "fsdp_info", None)
    if info is None:
        raise ValueError("the model is not wrapped by wrap_fsdp1/wrap_fsdp2")
    return info


def _record_specs(model: nn.Module) -> Dict[str, ParamSpec]:
    specs = {}
    for name, param in model.named_parameters():
        meta = param_meta(param)
        if meta.is_expert:
            raise NotImplementedError(f"FSDP of expert parameters ({name}) is not supported yet: it needs a "
                                      "mesh over the expert-DP group; use DDP (drop --use-torch-fsdp2/--use-torch-fsdp)")
        specs[name] = ParamSpec(name, param.shape, meta)
    return specs


def named_fsdp_params(model: nn.Module) -> Iterator[Tuple[str, nn.Parameter]]:
    """``(clean name, parameter)`` of a wrapped model, in a fixed order on every rank."""
    for name, param in model.named_parameters():
        yield clean_name(name), param


def _restore_meta(model: nn.Module, specs: Dict[str, ParamSpec]) -> None:
    """fully_shard replaces each parameter by a DTensor one: put its metadata back (FSDP1 too)."""
    for name, param in named_fsdp_params(model):
        set_meta(param, specs[name].meta)


# --------------------------------------------------------------------------- groups and meshes

def _all_dp_cp_rank_lists(state: ParallelState) -> List[List[int]]:
    """Every dense ``dp_cp`` group of the world (needed: new_group is collective)."""
    dp_rest = state.world_size // (state.tp * state.pp * state.cp * state.ep)
    sizes = {"tp": state.tp, "cp": state.cp, "ep": state.ep, "dp": dp_rest, "pp": state.pp}
    return group_ranks(sizes, GROUP_DIMS["dp_cp"])


def _hsdp_rank_lists(dp_ranks: Sequence[int], replicate: int) -> Tuple[List[List[int]], List[List[int]]]:
    """Shard groups (contiguous runs of ``dp_cp`` ranks) and replicate groups (strided) of one ``dp_cp`` group."""
    shard = len(dp_ranks) // replicate
    shard_lists = [list(dp_ranks[i * shard:(i + 1) * shard]) for i in range(replicate)]
    replicate_lists = [list(dp_ranks[j::shard]) for j in range(shard)]
    return shard_lists, replicate_lists


def _new_groups(rank_lists: Sequence[Sequence[int]], rank: int) -> Group:
    """Create a process group for every list (collective, same order everywhere); return ours."""
    mine: Optional[Group] = None
    for ranks in rank_lists:
        handle = dist.new_group(list(ranks))
        if rank in ranks:
            mine = Group(list(ranks), handle, list(ranks).index(rank))
    assert mine is not None, f"rank {rank} is in none of {rank_lists}"
    return mine


def data_parallel_groups(state: ParallelState, replicate: int = 1) -> Tuple[Group, Group]:
    """(shard group, replicate group) over this rank's DP x CP ranks; every group has a handle.

    Collective over the world when new groups are needed (HSDP, or DP x CP = 1).
    """
    if not dist.is_initialized():
        raise RuntimeError("FSDP needs torch.distributed to be initialised")
    dp_cp = state.group("dp_cp")
    if replicate < 1 or dp_cp.size % replicate != 0:
        raise ValueError(f"HSDP replicate degree {replicate} does not divide the data-parallel x "
                         f"context-parallel size {dp_cp.size}")
    if replicate == 1 and dp_cp.handle is not None:
        return dp_cp, Group([state.rank], None, 0)
    pairs = [_hsdp_rank_lists(ranks, replicate) for ranks in _all_dp_cp_rank_lists(state)]
    shard = _new_groups([r for shard_lists, _ in pairs for r in shard_lists], state.rank)
    if replicate == 1:
        return shard, Group([state.rank], None, 0)
    return shard, _new_groups([r for _, replicate_lists in pairs for r in replicate_lists], state.rank)


def build_dp_mesh(state: ParallelState, device_type: str, replicate: int = 1) -> Tuple[DeviceMesh, Group, Group]:
    """A 1-D mesh over the DP x CP ranks, or a 2-D ``(replicate, shard)`` mesh for HSDP."""
    shard, rep = data_parallel_groups(state, replicate)
    if replicate == 1:
        return DeviceMesh.from_group(shard.handle, device_type), shard, rep
    dp_ranks = state.group("dp_cp").ranks
    layout = torch.tensor(dp_ranks, dtype=torch.int).reshape(replicate, len(dp_ranks) // replicate)
    mesh = DeviceMesh.from_group([rep.handle, shard.handle], device_type, mesh=layout,
                                 mesh_dim_names=("replicate", "shard"))
    return mesh, shard, rep


def adapter_factors(module: nn.Module) -> List[nn.Module]:
    """The LoRA factors (``lora_A`` / ``lora_B`` modules) inside ``module``, in a fixed order."""
    from core.tensor_parallel.lora import LoraFactor

    return [m for m in module.modules() if isinstance(m, LoraFactor)]


def _device_type(model: nn.Module) -> str:
    return next(model.parameters()).device.type


# --------------------------------------------------------------------------- FSDP2

def _dp_shard_start(rows: int, shard_rank: int, shard_size: int) -> int:
    """First dim-0 row of a torch.chunk-style shard (FSDP2's layout)."""
    chunk = -(-rows // shard_size) if rows else 0
    return min(shard_rank * chunk, rows)


def _set_fsdp2_windows(model: nn.Module, specs: Dict[str, ParamSpec]) -> None:
    for name, param in named_fsdp_params(model):
        spec = specs[name]
        if not isinstance(param, DTensor):
            continue
        mesh, placements = param.device_mesh, param.placements
        shard_dims = [i for i, p in enumerate(placements) if isinstance(p, Shard)]
        assert len(shard_dims) == 1 and placements[shard_dims[0]].dim == 0, placements
        rows = spec.shape[0] if len(spec.shape) else 0
        start = _dp_shard_start(rows, mesh.get_local_rank(shard_dims[0]), mesh.size(shard_dims[0]))
        spec.flat_start = start * (spec.numel // rows if rows else 0)


def wrap_fsdp2(model: nn.Module, state: ParallelState, *, param_dtype: Optional[torch.dtype] = None,
               reduce_dtype: Optional[torch.dtype] = torch.float32, hsdp_replicate: int = 1,
               reshard_after_forward: bool = True) -> nn.Module:
    """``fully_shard`` each transformer layer, then the root, over our DP x CP ranks (in place)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    specs = _record_specs(model)
    mesh, shard, rep = build_dp_mesh(state, _device_type(model), hsdp_replicate)
    fp32_stream = getattr(getattr(model, "config", None), "fp32_residual_connection", False)
    # an fp32 residual stream enters each layer as it is (--fp32-residual-connection); the layers cast
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype,
                                  cast_forward_inputs=not fp32_stream)
    adapter_policy = MixedPrecisionPolicy(param_dtype=None, reduce_dtype=torch.float32, cast_forward_inputs=False)
    for layer in transformer_layers(model):
        factors = adapter_factors(layer)
        if factors:  # one fp32 unit per layer: the adapters compute, reduce and step in fp32 under --bf16
            fully_shard(factors, mesh=mesh, mp_policy=adapter_policy, reshard_after_forward=reshard_after_forward)
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard_after_forward)
    _divide_gradients_by_dp(model, state, mesh.size())
    _restore_meta(model, specs)
    _set_fsdp2_windows(model, specs)
    model.fsdp_info = FSDPInfo("fsdp2", shard, rep, specs)
    return model


def _divide_gradients_by_dp(model: nn.Module, state: ParallelState, reduced_over: int) -> None:
    """Under CP the gradient is summed over CP, averaged over DP: divide by DP, not by the mesh size.

    Sum-only collectives then one division (``PREMUL_SUM``, FSDP2's choice
    otherwise, is NCCL-only); the factor is the total over both HSDP dims.
    """
    from torch.distributed.fsdp import FSDPModule

    if reduced_over == state.dp:
        return
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(float(state.dp))
            module.set_force_sum_reduction_for_comms(True)


@contextlib.contextmanager
def fsdp_no_sync(model: nn.Module) -> Iterator[None]:
    """Backward passes inside accumulate gradients without reducing them over DP.

    FSDP2: ``set_requires_gradient_sync(False)`` (sharded gradients keep accumulating
    locally until a synchronised backward); FSDP1: its own ``no_sync()``.
    """
    if fsdp_info(model).kind == "fsdp1":
        with model.no_sync():
            yield
        return
    model.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        model.set_requires_gradient_sync(True)


# --------------------------------------------------------------------------- FSDP1

def _set_fsdp1_windows(model: nn.Module, specs: Dict[str, ParamSpec]) -> None:
    """FSDP1 flattens each unit; an original parameter's shard is a flat window of it."""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    names = {id(p): n for n, p in named_fsdp_params(model)}
    for unit in FSDP.fsdp_modules(model):
        handle = unit._handle  # private, stable across FSDP1 releases; FSDP1 is frozen upstream
        if handle is None:
            continue
        flat = handle.flat_param
        for param, info in zip(flat._params, flat._shard_param_infos):
            if handle.uses_sharded_strategy and info.in_shard:
                specs[names[id(param)]].flat_start = info.intra_param_start_idx


def wrap_fsdp1(model: nn.Module, state: ParallelState, *, mixed_precision=None,
               sharding_strategy: str = "FULL_SHARD", hsdp_replicate: int = 2) -> nn.Module:
    """PyTorch's FullyShardedDataParallel over the DP x CP ranks, one unit per transformer layer.

    ``mixed_precision``: a ``torch.distributed.fsdp.MixedPrecision`` or None.
    ``HYBRID_SHARD`` shards within groups of ``dp x cp / hsdp_replicate`` ranks and
    replicates over ``hsdp_replicate`` of them. FSDP1 averages over all of
    them; ``grad_post_scale`` (CP) turns that into the sum over CP.
    """
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy

    if sharding_strategy not in SHARDING_STRATEGIES:
        raise ValueError(f"sharding strategy {sharding_strategy!r} is not one of {SHARDING_STRATEGIES}")
    specs = _record_specs(model)
    replicate = hsdp_replicate if sharding_strategy == "HYBRID_SHARD" else 1
    if replicate > 1 and replicate == state.group("dp_cp").size:
        # shards of one rank: FSDP1 would run NO_SHARD over that rank alone and never reduce over the
        # replicas; replicating over every DP x CP rank is NO_SHARD over all of them
        sharding_strategy, replicate = "NO_SHARD", 1
    shard, rep = data_parallel_groups(state, replicate)
    process_group = (shard.handle, rep.handle) if replicate > 1 else shard.handle
    layer_ids = {id(layer) for layer in transformer_layers(model)}
    factor_ids = {id(factor) for factor in adapter_factors(model)}
    policy = _fsdp1_policy(layer_ids, factor_ids) if factor_ids else functools.partial(
        lambda_auto_wrap_policy, lambda_fn=lambda module: id(module) in layer_ids)
    device = next(model.parameters()).device
    wrapped = FSDP(model, process_group=process_group, sharding_strategy=ShardingStrategy[sharding_strategy],
                   auto_wrap_policy=policy, mixed_precision=mixed_precision, use_orig_params=True,
                   device_id=device)  # an explicit device: FSDP1 refuses CPU modules otherwise
    _restore_meta(wrapped, specs)
    _set_fsdp1_windows(wrapped, specs)
    if sharding_strategy == "NO_SHARD":
        shard = Group([state.rank], None, 0)
    wrapped.fsdp_info = FSDPInfo("fsdp1", shard, rep, specs, grad_post_scale=float(state.cp))
    return wrapped


def _fsdp1_policy(layer_ids: set, factor_ids: set):
    """Units per transformer layer and per LoRA factor; a factor's unit keeps fp32 (no mixed precision)."""
    from torch.distributed.fsdp.wrap import CustomPolicy

    def unit(module: nn.Module):
        if id(module) in factor_ids:
            return {"mixed_precision": None}
        return id(module) in layer_ids

    return CustomPolicy(unit)


# --------------------------------------------------------------------------- TP sums on DP shards

def local_grad(param: nn.Parameter) -> Optional[torch.Tensor]:
    """This rank's gradient shard, flattened (a view: in-place changes reach ``param.grad``)."""
    grad = param.grad
    if grad is None:
        return None
    if isinstance(grad, DTensor):
        grad = grad.to_local()
    if not grad.is_contiguous():
        raise RuntimeError("FSDP gradient shards are expected to be contiguous")
    return grad.view(-1)


def _flat_all_reduce(tensors: List[torch.Tensor], group: Group) -> None:
    if not tensors or group.size == 1:
        return
    flat = torch.cat(tensors)
    all_reduce(flat, group)
    torch._foreach_copy_(tensors, list(flat.split([t.numel() for t in tensors])))


@torch.no_grad()
def finalize_fsdp_grads(model: nn.Module, state: ParallelState) -> None:
    """FSDP1's CP factor and the TP sums FSDP does not know of, applied to the reduced gradient shards.

    Same order of parameters on every TP rank, and the same windows, so the
    element-wise collectives line up.
    """
    info = fsdp_info(model)
    if info.grad_post_scale != 1.0:
        grads = [g for g in (local_grad(p) for _, p in named_fsdp_params(model)) if g is not None and g.numel()]
        torch._foreach_mul_(grads, info.grad_post_scale)
    tp_group = state.tp_group
    if tp_group.size == 1:
        return
    partial = []
    for name, param in named_fsdp_params(model):
        grad = local_grad(param)
        if grad is None or grad.numel() == 0:
            continue
        spec = info.specs[name]
        if spec.meta.grad_partial_over_tp:
            partial.append(grad)
        shard = spec.meta.tp_shard
        if shard is not None and shard.has_replicas(tp_group.size):
            sum_replicas_over_tp(grad, shard, spec.shape, spec.flat_start, tp_group)
    _flat_all_reduce(partial, tp_group)


# --------------------------------------------------------------------------- checkpoints

def frozen_names(model: nn.Module) -> set:
    """Clean names of the parameters that do not train (LoRA's base)."""
    return {name for name, param in named_fsdp_params(model) if not param.requires_grad}


def _full_fsdp2_state_dict(model: nn.Module, keep: bool, skip: set) -> Dict[str, torch.Tensor]:
    """One tensor at a time (those not in ``skip``): all-gather over the mesh, keep a CPU copy where wanted."""
    result = {}
    for name, value in model.state_dict().items():
        if clean_name(name) in skip:
            continue
        full = value.full_tensor() if isinstance(value, DTensor) else value
        if keep:
            result[clean_name(name)] = full.detach().cpu().clone()
    return result


def _full_fsdp1_state_dict(model: nn.Module, keep: bool, skip: set) -> Dict[str, torch.Tensor]:
    from torch.distributed.fsdp import FullStateDictConfig, FullyShardedDataParallel as FSDP, StateDictType

    # Every rank gathers: on CPU (torch 2.13) rank0_only=True crashes (SIGSEGV) and
    # offload_to_cpu=True returns {} on ranks > 0; both key on the FSDP group's rank 0 anyway.
    config = FullStateDictConfig(offload_to_cpu=False, rank0_only=False)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, config):
        state = model.state_dict()
        return {clean_name(k): v.detach().cpu().clone() for k, v in state.items()
                if clean_name(k) not in skip} if keep else {}


def full_model_state_dict(model: nn.Module, state: ParallelState, on_every_rank: bool = False,
                          trainable_only: bool = False) -> Dict[str, torch.Tensor]:
    """The TP-local, unsharded state dict on ``dp_cp`` rank 0 (``{}`` elsewhere; on every rank with
    ``on_every_rank``, e.g. for a DPO reference copy). Collective over DP x CP.

    Equal to ``model.state_dict()`` of the same model without FSDP, so the
    ``model`` entry of a Megatron checkpoint does not depend on FSDP.
    (``get_model_state_dict(cpu_offload=True)`` keeps the result on *global*
    rank 0 only, which loses TP ranks > 0; hence these loops.) ``trainable_only``: without the frozen
    parameters (LoRA's adapter checkpoints); FSDP2 then gathers the trainable ones only.
    """
    keep = on_every_rank or state.group("dp_cp").rank == 0
    skip = frozen_names(model) if trainable_only else set()
    if fsdp_info(model).kind == "fsdp2":
        return _full_fsdp2_state_dict(model, keep, skip)
    return _full_fsdp1_state_dict(model, keep, skip)


@torch.no_grad()
def _load_fsdp2(model: nn.Module, full: Dict[str, torch.Tensor], strict: bool) -> LoadResult:
    targets = dict(model.named_parameters())
    targets.update(model.named_buffers())
    missing = sorted(set(targets) - set(full))
    unexpected = sorted(set(full) - set(targets))
    if strict and (missing or unexpected):
        raise RuntimeError(f"state dict does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for name, target in targets.items():
        value = full.get(name)
        if value is None:
            continue
        if isinstance(target, DTensor):
            local = distribute_tensor(value.to(target.device, target.dtype), target.device_mesh,
                                      target.placements, src_data_rank=None).to_local()
            target.to_local().copy_(local)
        else:
            target.copy_(value)
    return LoadResult(missing, unexpected)


def _load_fsdp1(model: nn.Module, full: Dict[str, torch.Tensor], strict: bool) -> LoadResult:
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, StateDictType

    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT):
        result = model.load_state_dict(full, strict=strict)
    return LoadResult(sorted({clean_name(k) for k in result.missing_keys}),
                      sorted({clean_name(k) for k in result.unexpected_keys}))


@dataclass
class LoadResult:
    """The clean names a non-strict load left alone (``nn.Module.load_state_dict``'s result)."""

    missing_keys: List[str]
    unexpected_keys: List[str]


def load_full_model_state_dict(model: nn.Module, full: Dict[str, torch.Tensor], strict: bool = True) -> LoadResult:
    """Load a full (TP-local) state dict, present on every rank, into the sharded model.

    ``strict=False`` loads the entries the model has and reports the others (LoRA: a base checkpoint
    without adapters, or an adapter checkpoint without the base).
    """
    if fsdp_info(model).kind == "fsdp2":
        return _load_fsdp2(model, full, strict)
    return _load_fsdp1(model, full, strict)


def cpu_copy(value):
    """``value`` with every tensor in it (nested dicts, lists, tuples) copied to the host."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: cpu_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(cpu_copy(v) for v in value)
    return value


# --------------------------------------------------------------------------- flags

class FSDPArgumentError(ValueError):
    """An FSDP flag combination that is not supported; the message is one line."""


def uses_fsdp(args: argparse.Namespace) -> bool:
    """``--use-torch-fsdp2`` (Megatron's flag) or ``--use-torch-fsdp`` (FullyShardedDataParallel)."""
    return bool(getattr(args, "use_torch_fsdp2", False) or getattr(args, "use_torch_fsdp", False))


def validate_fsdp_args(args: argparse.Namespace) -> None:
    """Reject FSDP combinations that are not supported, before any process-group work."""
    if not uses_fsdp(args):
        return
    flag = "--use-torch-fsdp2" if getattr(args, "use_torch_fsdp2", False) else "--use-torch-fsdp"
    checks = [
        (getattr(args, "use_distributed_optimizer", False),
         f"{flag} and --use-distributed-optimizer both shard the optimizer state; drop --use-distributed-optimizer"),
        (flag == "--use-torch-fsdp2" and getattr(args, "overlap_param_gather", False),
         "--use-torch-fsdp2 gathers parameters itself; drop --overlap-param-gather"),
        (getattr(args, "swap_optimizer", False),
         f"--swap-optimizer is not supported with {flag}; drop one of them"),
        (getattr(args, "pipeline_model_parallel_size", 1) > 1,
         f"{flag} with --pipeline-model-parallel-size > 1 is not supported yet; use PP = 1"),
        (getattr(args, "fp16", False),
         f"{flag} does not support --fp16 (no loss scaling with FSDP); use --bf16"),
    ]
    for failed, message in checks:
        if failed:
            raise FSDPArgumentError(message)
    _check_fsdp_layout(args, flag)


def _check_fsdp_layout(args: argparse.Namespace, flag: str) -> None:
    """Only one FSDP flavour; the HSDP replicate degree must divide the DP x CP ranks FSDP shards over."""
    if getattr(args, "use_torch_fsdp2", False) and getattr(args, "use_torch_fsdp", False):
        raise FSDPArgumentError("--use-torch-fsdp2 and --use-torch-fsdp are mutually exclusive; pass one")
    replicate = getattr(args, "hsdp_replicate_size", 1) or 1
    dp = getattr(args, "data_parallel_size", None)
    shard_ranks = None if dp is None else dp * (getattr(args, "context_parallel_size", 1) or 1)
    if replicate < 1 or (shard_ranks is not None and shard_ranks % replicate != 0):
        raise FSDPArgumentError(f"--hsdp-replicate-size {replicate} must be >= 1 and divide the data-parallel x "
                                f"context-parallel size {shard_ranks}; change it or the number of processes")
