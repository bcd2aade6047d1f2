"""The distributed optimizer (ZeRO-1): each DP rank steps only its shard.

The gradient buffers (core/distributed/grad_buffer.py, built with
``distributed_optimizer=True``) pad every bucket to a multiple of the DP size;
DP rank ``r`` owns the ``r``-th chunk of each bucket. The intersection of that
chunk with a parameter is a *piece*. Per piece, the rank keeps the fp32
master weight (for an fp32 model, a view of the weight itself) and the Adam
states, so optimizer memory per rank is 1/DP of the plain optimizer's.

A step (the template of ``LossScalingOptimizer.step``): gradients were reduce-scattered (each rank holds the DP mean of its
chunk); unscale and check for inf/nan (fp16), take the global norm over the
pieces of all DP ranks and of TP/PP, clip, step the pieces, write them into
the model weights (bf16/fp16), and all-gather every bucket's weights
(asynchronously with ``overlap_param_gather``: a forward pre-hook waits for a
bucket's gather before the first module that uses it runs).

Checkpoints: ``sharded_state`` gathers the full, DP-independent per-parameter
state (master weight, Adam moments) for DP rank 0 to save as
``distrib_optim.pt``; ``load_sharded_state`` slices it for any DP size.

With ``--use-precision-aware-optimizer`` the torch optimizer is
``PrecisionAwareAdamW`` (core/optimizer/precision_aware.py): masters in
``--main-params-dtype``, moments in their ``--exp-*-dtype`` (fp8 and fp16 with
scales from amaxes all-reduced over DP); checkpoints hold fp32 values either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

import torch
from torch import nn

from core.distributed.grad_buffer import Bucket, GradBuffers
from core.optimizer.clip_grads import any_non_finite, norm_squared_of_range
from core.optimizer.muon import MUON_KEYS, Muon, orthogonalize_local, split_muon_groups, uses_muon
from core.optimizer.optimizer import (GradScaler, LossScalingOptimizer, OptimizerConfig, build_qk_clip,
                                      build_torch_optimizer, flat_fp32_copies, no_weight_decay, state_keys)
from core.optimizer.swap import MOMENTS
from core.optimizer.precision_aware import (PrecisionAwareAdamW, attach_grad, drop_grad, load_moments, moments_fp32,
                                            shard_amax_reduction)
from core.parallel_state import ParallelState
from core.tensor_parallel.mappings import all_gather_single, all_reduce, any_rank
from core.tensor_parallel.param_meta import param_meta


@dataclass
class Piece:
    """The part ``[start, end)`` of a flattened parameter that this DP rank owns."""

    name: str
    param: nn.Parameter
    start: int
    end: int
    master: nn.Parameter


def _pieces_of_bucket(bucket: Bucket, ranges: Dict[int, Tuple[int, int]], names: Dict[int, str]) -> List[Tuple]:
    chunk_start = bucket.offset + bucket.dp_group.rank * bucket.shard_size
    chunk_end = chunk_start + bucket.shard_size
    found = []
    for param in bucket.params:
        first, last = ranges[id(param)]
        lo, hi = max(first, chunk_start), min(last, chunk_end)
        if lo < hi:
            found.append((names[id(param)], param, lo - first, hi - first))
    return found


def _make_masters(found: List[Tuple], dtype: torch.dtype = torch.float32) -> List[nn.Parameter]:
    """The master of each ``(name, param, start, end)`` piece: fp32 weights are their own masters
    (views: the step updates the weight in place); others get ``dtype`` copies in one flat buffer, in bucket
    order."""
    pieces = [param.data.view(-1)[start:end] for _, param, start, end in found]
    copies = iter(flat_fp32_copies([piece for piece in pieces if piece.dtype != torch.float32], dtype))
    return [nn.Parameter(piece) if piece.dtype == torch.float32 else next(copies) for piece in pieces]


class DistributedOptimizer(LossScalingOptimizer):
    """Adam on this DP rank's shard of the fp32 master weights."""

    def __init__(self, models: List[nn.Module], buffers: List[GradBuffers], config: OptimizerConfig,
                 state: ParallelState, grad_scaler: Optional[GradScaler] = None,
                 overlap_param_gather: bool = False) -> None:
        self.config, self.state, self.grad_scaler = config, state, grad_scaler
        self.buffers, self.overlap_param_gather = buffers, overlap_param_gather
        names = {id(p): name for model in models for name, p in model.named_parameters()}
        self.names = names
        found = [piece for model_buffers in buffers for buffer in model_buffers.buffers for bucket in buffer.buckets
                 for piece in _pieces_of_bucket(bucket, buffer.param_ranges, names)]
        self.pieces: List[Piece] = [Piece(name, param, start, end, master) for (name, param, start, end), master
                                    in zip(found, _make_masters(found, config.main_params_dtype))]
        self.mixed = any(piece.param.dtype != torch.float32 for piece in self.pieces)
        decay = [p.master for p in self.pieces if not no_weight_decay(p.name, p.param)]
        no_decay = [p.master for p in self.pieces if no_weight_decay(p.name, p.param)]
        groups = [g for g in ({"params": decay, "wd_mult": 1.0, "lr_mult": 1.0},
                              {"params": no_decay, "wd_mult": 0.0, "lr_mult": 1.0}) if g["params"]]
        self._piece_of = {id(piece.master): piece for piece in self.pieces}
        if config.optimizer == "muon":
            groups = split_muon_groups(groups, lambda master: uses_muon(self._piece_of[id(master)].name,
                                                                        self._piece_of[id(master)].param))
        self.optimizer = build_torch_optimizer(groups or [{"params": [], "wd_mult": 1.0, "lr_mult": 1.0}], config,
                                               distributed=True)
        self.qk_clip = build_qk_clip(models, config, state)
        if isinstance(self.optimizer, Muon):
            self.optimizer.orthogonalize_batch = self._orthogonalize
        if isinstance(self.optimizer, PrecisionAwareAdamW):  # moment scales from amaxes over whole parameters
            self.optimizer.reduce_amaxes = shard_amax_reduction(buffers, [(p.param, p.master) for p in self.pieces])
        self._pending_gathers: Dict[int, object] = {}
        self._window_loads: List[Tuple[Piece, Dict[str, torch.Tensor]]] = []  # (window_targets)
        self._hooks = [m.register_forward_pre_hook(self._wait_for_params) for model in models
                       for m in model.modules() if any(True for _ in m.parameters(recurse=False))]
        self._hooks += [m.register_forward_pre_hook(self._wait_for_direct_reads) for model in models
                        for m in model.modules() if hasattr(m, "params_read_directly")]

    def _keys_of(self, name: str, param: nn.Parameter) -> Tuple[str, ...]:
        """The moment tensors a parameter's pieces keep (:func:`~core.optimizer.optimizer.state_keys`)."""
        return state_keys(self.config.optimizer, name, param)

    @property
    def _all_keys(self) -> Tuple[str, ...]:
        """Every kind of moment some parameter keeps under this run's --optimizer."""
        return {"sgd": MUON_KEYS, "muon": MOMENTS + MUON_KEYS}.get(self.config.optimizer, MOMENTS)

    def _orthogonalize(self, masters: List[torch.Tensor], updates: List[torch.Tensor]) -> List[torch.Tensor]:
        """Muon's directions for this rank's pieces: each piece's update is gathered over DP into its parameter's
        TP-local tensor (bucket by bucket, the buckets that hold a matrix), orthogonalised once per parameter,
        and cut back into the piece."""
        pieces = [self._piece_of[id(master)] for master in masters]
        values = {(id(piece.param), piece.start): update for piece, update in zip(pieces, updates)}
        full = self._gather_pieces(values, uses_muon, to_host=False)
        directions: Dict[str, torch.Tensor] = {}
        result = []
        for piece in pieces:
            if piece.name not in directions:
                local = full[piece.name].view(piece.param.shape)
                directions[piece.name] = orthogonalize_local(local, piece.name, param_meta(piece.param),
                                                             self.config.muon, self.state.tp_group).reshape(-1)
            result.append(directions[piece.name][piece.start:piece.end])
        return result

    # ---- the step ----------------------------------------------------------------------------
    def _attach_grads(self) -> List[torch.Tensor]:
        grads = []
        for piece in self.pieces:
            grad = piece.param.main_grad.view(-1)[piece.start:piece.end]
            grad = grad if grad.dtype == torch.float32 else grad.float()
            attach_grad(piece.master, grad)  # (an fp16 master's fp32 gradient: decoupled_grad)
            grads.append(grad)
        return grads

    def _grad_norm(self, grads: List[torch.Tensor]) -> float:
        """Sum over this rank's pieces, then over DP (the pieces of the other ranks; for expert
        pieces the DP group spans the EP ranks too, so every expert is counted once) and MP."""
        tp = self.state.tp_group
        device = self.pieces[0].master.device if self.pieces else torch.device("cpu")
        total = torch.zeros(1, device=device)
        for piece, grad in zip(self.pieces, grads):
            total += norm_squared_of_range(piece.param, grad, piece.start, tp.rank, tp.size)
        all_reduce(total, self.state.group("dp_cp"))  # the ranks the pieces are sharded over
        all_reduce(total, self.state.group("mp"))
        return float(total.sqrt().item())

    def _found_non_finite(self, grads: List[torch.Tensor]) -> bool:
        local = any_non_finite(grads, self.state.group("dp_cp"))
        return any_rank(local, self.state.group("mp"))

    def _drop_grads(self) -> None:
        for piece in self.pieces:
            drop_grad(piece.master)

    def _publish_params(self) -> None:
        """Write the updated pieces into the model weights (bf16/fp16), then all-gather every bucket."""
        if self.mixed:
            for piece in self.pieces:
                piece.param.data.view(-1)[piece.start:piece.end].copy_(piece.master.data)
        self._gather_params()

    def _scale_rows(self, param: nn.Parameter, factors: torch.Tensor) -> None:
        """Scale this rank's pieces of ``param`` (the gather after the step spreads them)."""
        columns = param.numel() // param.shape[0]
        for piece in self.pieces:
            if piece.param is param:
                per_element = factors.to(piece.master.dtype).repeat_interleave(columns)  # [rows * columns]
                piece.master.mul_(per_element[piece.start:piece.end])

    def _gather_params(self) -> None:
        for model_buffers in self.buffers:
            for bucket in model_buffers.buckets:
                work = bucket.all_gather_params(async_op=self.overlap_param_gather)
                if work is not None and self.overlap_param_gather:
                    for param in bucket.params:
                        self._pending_gathers[id(param)] = work

    def _wait_for_params(self, module: nn.Module, _inputs) -> None:
        if not self._pending_gathers:
            return
        for param in module.parameters(recurse=False):
            work = self._pending_gathers.pop(id(param), None)
            if work is not None:
                work.wait()

    def _wait_for_direct_reads(self, module: nn.Module, _inputs) -> None:
        """Before a model runs: the parameters it reads without calling their module (the output weight)."""
        if not self._pending_gathers:
            return
        for param in module.params_read_directly():
            work = self._pending_gathers.pop(id(param), None)
            if work is not None:
                work.wait()

    def finish_param_sync(self) -> None:
        """Wait for every outstanding weight all-gather (before saving or evaluating)."""
        for work in {id(w): w for w in self._pending_gathers.values()}.values():
            work.wait()
        self._pending_gathers.clear()

    # ---- checkpoints -------------------------------------------------------------------------
    def reload_model_params(self) -> None:
        """Refresh master pieces from the model (after loading model weights only)."""
        with torch.no_grad():
            for piece in self.pieces:
                if self.mixed:
                    piece.master.copy_(piece.param.data.view(-1)[piece.start:piece.end].float())

    def state_dict(self) -> Dict:
        """Per-rank scalars (step count, scaler); the shards go to ``distrib_optim.pt``."""
        return self.scalars()

    def load_state_dict(self, state: Dict) -> None:
        self.load_scalars(state)
        self._loaded_step = state.get("step", 0.0)

    def windows(self) -> List[Tuple[str, Tuple[int, ...], int, Dict[str, torch.Tensor]]]:
        """This rank's share of each parameter's state, for a checkpoint written without gathering:
        ``(name, the parameter's shape, flat start, {kind: flat tensor})``: the moments and, for a bf16/fp16
        model, ``fp32_param``."""
        result = []
        for piece in self.pieces:
            entries = moments_fp32(self.optimizer, piece.master, self._keys_of(piece.name, piece.param))
            if self.mixed:
                entries["fp32_param"] = piece.master.detach().float()
            result.append((piece.name, tuple(piece.param.shape), piece.start, entries))
        return result

    def window_targets(self, kinds: List[str]) -> List[Tuple[str, Tuple[int, ...], int, Dict[str, torch.Tensor]]]:
        """The tensors a load fills in place, as :meth:`windows` (``fp32_param`` only for a bf16/fp16 model:
        an fp32 model's masters are its weights, loaded already): fp32 tensors that :meth:`finish_window_load`
        stores (the moments in their storage dtypes, fp16 masters rounded)."""
        result, self._window_loads = [], []
        for piece in self.pieces:
            keys = self._keys_of(piece.name, piece.param)
            entries = {kind: torch.zeros_like(piece.master, dtype=torch.float32) for kind in kinds
                       if (kind == "fp32_param" and self.mixed) or kind in keys}
            self._window_loads.append((piece, entries))
            result.append((piece.name, tuple(piece.param.shape), piece.start, entries))
        return result

    @torch.no_grad()
    def finish_window_load(self, scalars: Dict, masters_loaded: bool) -> None:
        """After :meth:`window_targets` were filled: the step, the settings and the weights of a bf16/fp16 model
        (from the loaded masters, or the masters from the loaded weights when the checkpoint had none)."""
        self.load_state_dict(scalars)
        step = torch.tensor(float(scalars.get("step", 0.0)))
        loads = self._window_loads
        load_moments(self.optimizer, {piece.master: {k: v for k, v in entries.items() if k != "fp32_param"}
                                      for piece, entries in loads})  # (collective with scaled moments)
        for piece, entries in loads:
            self.optimizer.state[piece.master]["step"] = step.clone()
            if self.mixed and masters_loaded:
                piece.master.copy_(entries["fp32_param"])
                piece.param.data.view(-1)[piece.start:piece.end].copy_(piece.master)
            elif self.mixed:
                piece.master.copy_(piece.param.data.view(-1)[piece.start:piece.end].float())
        self._window_loads = []

    def sharded_state(self) -> Dict[str, Dict[str, torch.Tensor]]:
        """Full per-parameter master weights and moments, assembled over DP (every rank gets it)."""
        values = {(id(p.param), p.start): {"param": p.master.detach().float(),  # each piece's state, read once
                                           **moments_fp32(self.optimizer, p.master, self._keys_of(p.name, p.param))}
                  for p in self.pieces}
        result: Dict[str, Dict[str, torch.Tensor]] = {}
        for key in ("param",) + self._all_keys:
            wanted = (lambda name, param, key=key: key == "param" or key in self._keys_of(name, param))
            of_key = {at: state[key] for at, state in values.items() if key in state}
            for name, full in self._gather_pieces(of_key, wanted).items():
                result.setdefault(name, {})[key] = full
        return result

    def _gather_pieces(self, values: Dict[Tuple[int, int], torch.Tensor], wanted: Callable[[str, nn.Parameter], bool],
                       to_host: bool = True) -> Dict[str, torch.Tensor]:
        """Gather per-piece values (keyed ``(id(param), start)``, fp32) over DP into whole flat tensors by parameter
        name, for the parameters ``wanted(name, param)`` says (every rank must answer alike: a bucket with none is
        skipped by all). ``to_host``: copies on the CPU (a checkpoint) rather than views on the device."""
        result = {}
        for model_buffers in self.buffers:
            for buffer in model_buffers.buffers:
                for bucket in buffer.buckets:
                    chosen = [p for p in bucket.params if wanted(self.names[id(p)], p)]
                    if not chosen:
                        continue
                    chunk = torch.zeros(bucket.shard_size, dtype=torch.float32, device=buffer.data.device)
                    base = bucket.offset + bucket.dp_group.rank * bucket.shard_size
                    for param in chosen:
                        first, last = buffer.param_ranges[id(param)]
                        lo, hi = max(first, base), min(last, base + bucket.shard_size)
                        if lo < hi:
                            chunk[lo - base:hi - base] = values[(id(param), lo - first)]
                    full = torch.empty(bucket.shard_size * bucket.dp_group.size, dtype=torch.float32,
                                       device=chunk.device)
                    if bucket.dp_group.size > 1:
                        all_gather_single(full, chunk, group=bucket.dp_group.handle)
                    else:
                        full.copy_(chunk)
                    for param in chosen:
                        first, last = buffer.param_ranges[id(param)]
                        flat = full[first - bucket.offset:last - bucket.offset]
                        result[self.names[id(param)]] = flat.clone().cpu() if to_host else flat
        return result

    @torch.no_grad()
    def load_sharded_state(self, full: Dict[str, Dict[str, torch.Tensor]]) -> None:
        """Take this rank's pieces of a DP-independent state (from ``sharded_state``)."""
        step = torch.tensor(float(getattr(self, "_loaded_step", 0.0)))
        moments = {}
        for piece in self.pieces:
            if piece.name not in full:
                raise KeyError(f"distributed optimizer state has no entry for {piece.name}")
            saved = full[piece.name]
            piece.master.copy_(saved["param"][piece.start:piece.end].to(piece.master.dtype))
            if self.mixed:
                piece.param.data.view(-1)[piece.start:piece.end].copy_(piece.master)
            moments[piece.master] = {key: saved[key][piece.start:piece.end].clone()
                                     for key in self._keys_of(piece.name, piece.param)}
        load_moments(self.optimizer, moments)  # (collective with scaled moments)
        for piece in self.pieces:
            self.optimizer.state[piece.master]["step"] = step.clone()
