"""FP8 linears as a model transform: ``--fp8-format F --fp8-recipe R`` (Megatron-core's flags).

The build hook gives every column- and row-parallel linear of the decoder layers (attention and MLA projections,
the MLP, the recurrent mixers' in/out projections) the run's :class:`~core.quantization.fp8.Fp8Recipe`, except in
the layers ``--first-last-layers-bf16`` keeps in high precision; the embeddings, the output layer, the MTP layers
and the small projections that are plain ``nn.Linear`` (Mamba's ``x_proj``/``dt_proj``, the routers) stay in
the run's dtype. The weights and their master copies do not change: an FP8 run saves the weights a bf16 run
saves (plus the delayed recipe's histories), and either resumes the other.

Under ``--fp8-recipe delayed`` each quantised linear also gets a :class:`~core.quantization.fp8.DelayedScaling`:
the step hook reduces the step's amaxes over TP and DP x CP and updates the scales after every optimizer step, and
the histories and scales travel in the run's checkpoints (``fp8_delayed_scaling``, by linear name; under
``--ckpt-format torch_dist`` a tensor per linear and field, the same at any layout), so a resumed run continues
with the scales it had, at any TP/PP/DP layout; a checkpoint without them (a bf16 run's) starts as a new run does,
each tensor scaled by its own amax in the first step.

The checks refuse, one line each, what this does not cover yet: the routed experts' grouped GEMMs (a MoE model),
the zero-bubble schedule (its deferred weight gradients) and block sizes a TP split would cut.

The GEMMs run through one backend, chosen here once per run from ``--fp8-gemm`` and the device
(:func:`~core.quantization.fp8.choose_gemm`): ``torch._scaled_mm`` where the device has FP8 matrix units and the
recipe is per tensor or per row in E4M3/E5M2, else the emulation (quantise, dequantise, fp32 product); a forced
backend that cannot serve is refused in one line. The run names the choice once (rank 0).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from core.device import device_for_backend
from core.parallel_state import ParallelState
from core.quantization.fp8 import (FP8_CLASSES, SPLIT_IN, SPLIT_OUT, DelayedScaling, Fp8Recipe, check_blocks,
                                   choose_gemm, to_fp8, update_delayed_scaling)
from core.quantization.fp8_gemm import AUTO, GemmChoice
from core.tensor_parallel.layers import ColumnParallelLinear
from core.tensor_parallel.param_meta import param_meta
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.transforms.base import ModelTransform, register_transform

DECODER_LAYER = re.compile(r"^decoder\.layers\.(\d+)\.")
DELAYED_RECORD = "fp8_delayed_scaling"  # the checkpoint entry: {chunk: {linear name: history and scale}}
DELAYED_FIELDS = ("amax_history", "scale", "updates")  # DelayedScaling.state_dict's (torch_dist: a key each)


class Fp8Linears(ModelTransform):
    """Quantise the decoder layers' column/row-parallel products per the run's FP8 recipe."""

    name = "fp8"

    def __init__(self, recipe: Fp8Recipe, num_layers: int, bf16_start: int, bf16_end: int, gemm: GemmChoice) -> None:
        """``gemm``: the GEMM backend chosen for the run (``recipe.gemm``) and why."""
        self.recipe, self.num_layers, self.bf16_start, self.bf16_end = recipe, num_layers, bf16_start, bf16_end
        self.gemm = gemm

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Optional["Fp8Linears"]:
        if getattr(args, "fp4_format", None) is not None:
            recipe = Fp8Recipe(args.fp4_format, args.fp4_recipe)
        elif getattr(args, "fp8_format", None) is not None and getattr(args, "fp8_recipe", None) is not None:
            recipe = Fp8Recipe(args.fp8_format, args.fp8_recipe, args.fp8_amax_history_len,
                               args.fp8_amax_compute_algo, args.fp8_margin)
        else:
            return None
        first_last = getattr(args, "first_last_layers_bf16", False)
        device_type = getattr(args, "device", None) or device_for_backend(getattr(args, "distributed_backend", None))
        try:
            gemm = choose_gemm(recipe, getattr(args, "fp8_gemm", AUTO), device_type)
        except ValueError as error:
            raise ArgumentError(str(error)) from None
        return cls(dataclasses.replace(recipe, gemm=gemm.name), args.num_layers,
                   args.num_layers_at_start_in_bf16 if first_last else 0,
                   args.num_layers_at_end_in_bf16 if first_last else 0, gemm)

    def quantised(self, layer_number: int) -> bool:
        """Decoder layer ``layer_number`` (0-based) runs its linears in FP8."""
        return self.bf16_start <= layer_number < self.num_layers - self.bf16_end

    def linears(self, model: nn.Module) -> Iterator[Tuple[str, nn.Module]]:
        """The column/row-parallel linears this transform quantises, by name."""
        for name, module in model.named_modules():
            match = DECODER_LAYER.match(name)
            if type(module) in FP8_CLASSES and match is not None and self.quantised(int(match.group(1))):
                yield name, module

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        recipe = self.recipe.flag
        if getattr(args, "num_experts", None):
            raise ArgumentError(f"{recipe}: the routed experts' GEMMs are not quantised yet, so a MoE model would "
                                "train them in high precision; drop --fp8-format/--fp8-recipe (--fp4-format)")
        if getattr(args, "lora_target_modules", None) or getattr(args, "qlora", False):
            raise ArgumentError(f"{recipe} with LoRA/QLoRA: the adapters' linears are not FP8 linears yet; drop one")
        if getattr(args, "schedules_method", None) == "zero-bubble":
            raise ArgumentError(f"{recipe} with --schedules-method zero-bubble: FP8 linears do not defer their "
                                "weight gradients; use 1F1B")
        tp = args.tensor_model_parallel_size
        linears = list(self.linears(meta_model()))
        if not linears:
            raise ArgumentError(f"{recipe}: no decoder layer is left in FP8 (--num-layers-at-start-in-bf16/"
                                "--num-layers-at-end-in-bf16 cover them all)")
        for name, module in linears:
            split = (SPLIT_OUT if isinstance(module, ColumnParallelLinear) else SPLIT_IN) if tp > 1 else None
            try:
                check_blocks(self.recipe, tuple(module.weight.shape), split, self._pieces(module, tp), name)
            except ValueError as error:
                raise ArgumentError(str(error)) from None
        if int(os.environ.get("RANK", "0")) == 0:  # before any process group: torchrun's rank
            kind = "fp4" if self.recipe.fp4 else "fp8"
            print(f"{kind}: {self.recipe.format} {self.recipe.recipe} on {len(linears)} linears; {self.gemm.notice()}",
                  file=sys.stderr)

    @staticmethod
    def _pieces(module: nn.Module, tp: int) -> Tuple[int, ...]:
        """Each fused segment's per-rank size along the TP-split dimension (a replicated segment: whole)."""
        shard = param_meta(module.weight).tp_shard
        return tuple(segment.local_units(tp) * segment.unit_size for segment in shard.segments)

    def on_meta_model(self, model: nn.Module) -> None:
        for _, module in list(self.linears(model)):
            to_fp8(module, self.recipe)

    def _states(self, models: Sequence[nn.Module]) -> List[Tuple[str, str, DelayedScaling]]:
        """(chunk, linear name, state) of every delayed-scaling linear, in model order."""
        return [(str(chunk), name, module.fp8_state) for chunk, model in enumerate(models)
                for name, module in model.named_modules() if getattr(module, "fp8_state", None) is not None]

    def after_step(self, models: Sequence[nn.Module], state: ParallelState, applied: bool) -> None:
        """Delayed scaling: the step's amaxes over TP and DP x CP into the histories, new scales (a skipped update
        keeps the scales and forgets the step's amaxes, which may not be finite)."""
        states = [linear_state for _, _, linear_state in self._states(models)]
        if not applied:
            for linear_state in states:
                if linear_state.step_amax is not None:
                    linear_state.step_amax.zero_()
            return
        update_delayed_scaling(states, (state.tp_group, state.group("dp_cp")))

    def save_state(self, payload: Dict[str, Any], models: Sequence[nn.Module]) -> Dict[str, Any]:
        record: Dict[str, Dict[str, Any]] = {}
        for chunk, name, linear_state in self._states(models):
            if linear_state.history is not None:
                record.setdefault(chunk, {})[name] = linear_state.state_dict()
        if record:
            payload[DELAYED_RECORD] = record
        return payload

    def load_base(self, models: Sequence[nn.Module], content: Dict[str, Any], path: str) -> bool:
        """The checkpoint's delayed-scaling histories into this run's linears (the weights: the trainer's)."""
        record = content.get(DELAYED_RECORD)
        if record is not None:
            self._load_histories(models, lambda chunk, name: record.get(chunk, {}).get(name), path)
        return False

    def dist_state(self, models: Sequence[nn.Module]) -> Dict[str, torch.Tensor]:
        """Each delayed-scaling linear's history, scales and update count under its (global) name: the same on
        every rank that holds the linear (reduced over TP and DP x CP each step)."""
        result = {}
        for chunk, name, linear_state in self._states(models):
            linear_state.ensure(next(models[int(chunk)].parameters()).device)
            saved = linear_state.state_dict()
            result.update({f"{DELAYED_RECORD}.{name}.{field}": value.float() for field, value in saved.items()})
        return result

    def load_dist_state(self, models: Sequence[nn.Module], loaded: Dict[str, torch.Tensor], path: str) -> None:
        """The histories into this run's linears; a checkpoint with none (a run without delayed scaling) leaves
        them new."""
        def saved_of(_chunk: str, name: str) -> Optional[Dict[str, torch.Tensor]]:
            fields = {field: loaded.get(f"{DELAYED_RECORD}.{name}.{field}") for field in DELAYED_FIELDS}
            return None if any(value is None for value in fields.values()) else fields

        if loaded:
            self._load_histories(models, saved_of, path)

    def _load_histories(self, models: Sequence[nn.Module],
                        saved_of: Callable[[str, str], Optional[Dict[str, torch.Tensor]]], path: str) -> None:
        """Each delayed-scaling linear's state from ``saved_of(chunk, name)`` (None: the checkpoint of ``path``
        lacks it, a one-line error), whichever format held it."""
        for chunk, name, linear_state in self._states(models):
            saved = saved_of(chunk, name)
            if saved is None:
                raise ArgumentError(f"{path}: no FP8 amax history for {name}; resume with the run's layers in FP8 "
                                    "(--first-last-layers-bf16 and its counts as saved)")
            try:
                linear_state.load_state_dict(saved, next(models[int(chunk)].parameters()).device)
            except ValueError as error:
                raise ArgumentError(f"{path}: {name}: {error}") from None


register_transform(Fp8Linears.name, Fp8Linears.from_args)
