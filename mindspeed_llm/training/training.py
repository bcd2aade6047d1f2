"""The one trainer behind every entry (``pretrain_gpt.py`` today; the post-training stages next).

``run(argv, task_class)`` parses and validates the flags (before any
process-group work, the task's own checks included), sets up devices and
process groups, builds the model on the meta device, materialises it, wraps it
for data parallelism (our DDP or FSDP, one interface), builds the optimizer and
learning-rate schedule, resumes from ``--load`` if asked, and trains, logging
one Megatron-format line per ``--log-interval`` iterations, evaluating every
``--eval-interval`` and saving every ``--save-interval``. TensorBoard and W&B
receive the same figures (``loggers.py``).

What is trained is the task's business (``task.py``: datasets, collate,
forward step, named statistics); the loop never looks at it. Devices, process
groups, model chunks and the checkpoint spine come from ``mindspeed_llm/runtime.py``;
the run's progress (iteration, samples, schedule, RNG) is ``train_state.py``; the
model transforms the flags ask for (``mindspeed_llm/transforms/``) change the
model, what is saved and what is loaded through one protocol, and the trainer
names none of them.
:class:`Trainer` holds the pieces so that tests can drive single steps.
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Type

import torch
import torch.distributed as dist
from torch.utils.data import Dataset

from core import checkpointing
from core import dist_checkpointing as dcp_format
from core.datasets.samplers import PretrainingSampler
from core.datasets.indexed_dataset import IndexedDatasetError
from core.device import Accelerator, peak_tflops
from core.data_parallel import DataParallelModels, DDPModels, DDPOptions, FSDPModels, FSDPOptions
from core.distributed.fsdp import uses_fsdp
from core.models.gpt_model import build_model
from core.optimizer.muon import MuonSettings
from core.optimizer.optimizer import OptimizerConfig, build_grad_scaler
from core.optimizer.precision_aware import STORAGE_DTYPES
from core.parallel_state import ParallelState
from core.pipeline_parallel.schedules import PipelineOptions, get_forward_backward_func
from core.tensor_parallel.mappings import all_reduce, any_rank, first_on_any_rank
from core.tensor_parallel.random import get_all_rng_states, model_parallel_seed
from core.timers import RegionTimers, install as install_timers, timed
from core.transformer.block import transformer_layers
from core.transformer.compile import CompileReport, compile_failure, compile_layers
from core.transformer.config import TransformerConfig
from core.transformer.context_parallel import context_parallel_for, split_batch
from core.fused import fused_kernels_line
from core.transformer.moe.aux_losses import aux_loss_layers, aux_loss_names, take_tracked_aux_losses
from core.transformer.moe.router import update_expert_biases
from mindspeed_llm.arguments import (ArgumentError, parse_and_validate,
                                     transformer_config_from_args)
from mindspeed_llm.runtime import (WeightSource, build_chunks, check_device, find_rank_file, is_last_rank,
                                   load_model_weights, print_rank_0, print_rank_last, start_processes,
                                   tokenizer_and_vocab)
from mindspeed_llm.training import dist_checkpoint, failures
from mindspeed_llm.training.exit_conditions import ExitConditions
from mindspeed_llm.training.loggers import MetricWriters, build_metric_writers, iteration_values
from mindspeed_llm.training.lr_scheduler import scheduler_from_args
from mindspeed_llm.training.metrics import (IterationStats, format_log_line, format_timing, forward_flops_per_token,
                                            timing_regions, training_flops_per_token)
from mindspeed_llm.training.pretrain_task import PretrainTask, TrainingDataError
from mindspeed_llm.training.profiling import StepProfiler
from mindspeed_llm.training.save_lock import SaveDirectoryInUse, SaveLock
from mindspeed_llm.training.task import Batch, SkipStep, TrainingTask, stack_stats
from mindspeed_llm.training.train_state import TrainState, rank_rng_states
from mindspeed_llm.transforms.base import ModelTransform, TransformContext
from mindspeed_llm.transforms.registry import build_transforms

@dataclass
class StepResult:
    loss: float
    grad_norm: Optional[float]
    applied: bool
    stats: Dict[str, float] = field(default_factory=dict)  # every task statistic, the loss included
    # seconds: "forward-backward" and "optimizer" (device time with --log-timers-to-tensorboard)
    timers: Dict[str, float] = field(default_factory=dict)
    tokens: float = 0.0  # the positions (rows x length) the trained model processed, over DP and CP


class _CountingIterator:
    """Passes the micro-batches through, counts the token positions drawn (rows x length of ``tokens``) and
    the seconds spent drawing them."""

    def __init__(self, iterator: Iterator[Batch]) -> None:
        self.iterator, self.positions, self.seconds = iterator, 0, 0.0

    def __iter__(self) -> "_CountingIterator":
        return self

    def __next__(self) -> Batch:
        start = time.perf_counter()
        try:
            batch = next(self.iterator)
        finally:
            self.seconds += time.perf_counter() - start
        tokens = batch.get("tokens")
        self.positions += tokens.numel() if tokens is not None else 0
        return batch


def optimizer_config_from_args(args: argparse.Namespace) -> OptimizerConfig:
    return OptimizerConfig(optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
                           adam_beta1=args.adam_beta1, adam_beta2=args.adam_beta2, adam_eps=args.adam_eps,
                           sgd_momentum=args.sgd_momentum, clip_grad=args.clip_grad,
                           swap_optimizer=args.swap_optimizer, swap_chunk_elements=args.swap_optimizer_chunk_size,
                           skip_non_finite_grad_norm=args.check_for_nan_in_loss_and_grad,
                           muon=MuonSettings(momentum=args.muon_momentum, use_nesterov=args.muon_use_nesterov,
                                             num_ns_steps=args.muon_num_ns_steps, scale_mode=args.muon_scale_mode,
                                             extra_scale_factor=args.muon_extra_scale_factor,
                                             tp_mode=args.muon_tp_mode, split_qkv=args.muon_split_qkv,
                                             fp32_matmul_prec=args.muon_fp32_matmul_prec),
                           qk_clip_threshold=args.qk_clip_threshold if args.qk_clip else None,
                           qk_clip_alpha=args.qk_clip_alpha,
                           use_precision_aware_optimizer=args.use_precision_aware_optimizer,
                           main_params_dtype=STORAGE_DTYPES[args.main_params_dtype],
                           exp_avg_dtype=STORAGE_DTYPES[args.exp_avg_dtype],
                           exp_avg_sq_dtype=STORAGE_DTYPES[args.exp_avg_sq_dtype])


def _grad_dtype(args: argparse.Namespace) -> torch.dtype:
    """fp32 gradient accumulation, except fp16 models without --accumulate-allreduce-grads-in-fp32 and
    --main-grads-dtype bf16 (precision-aware optimizer)."""
    if args.fp16 and not args.accumulate_allreduce_grads_in_fp32:
        return torch.float16
    return STORAGE_DTYPES[args.main_grads_dtype]


def build_data_parallel_models(args: argparse.Namespace, config: TransformerConfig, state: ParallelState,
                               device: torch.device, transforms: Sequence[ModelTransform] = ()) -> DataParallelModels:
    """This rank's model chunks (changed by the ``transforms``' build hooks), wrapped for data parallelism, with
    their optimizer."""
    optimizer_config = optimizer_config_from_args(args)
    meta_hooks = [transform.on_meta_model for transform in transforms]
    if uses_fsdp(args):
        fp32_config = dataclasses.replace(config, params_dtype=torch.float32)  # FSDP keeps fp32 shards
        model = build_model(fp32_config, state, device, args.seed, meta_hooks)
        _compile_layers(args, config, [model])  # before fully_shard, as TorchTitan
        options = FSDPOptions("fsdp2" if args.use_torch_fsdp2 else "fsdp1", args.bf16, args.hsdp_replicate_size)
        return FSDPModels(model, options, state, optimizer_config)
    models = build_chunks(args, config, state, device, meta_hooks)
    _compile_layers(args, config, models)
    scaler = build_grad_scaler(args.fp16, args.loss_scale, args.initial_loss_scale, args.min_loss_scale,
                               args.loss_scale_window, args.hysteresis)
    options = DDPOptions(_grad_dtype(args), args.ddp_bucket_size, args.overlap_grad_reduce,
                         args.use_distributed_optimizer, args.overlap_param_gather)
    return DDPModels(models, options, state, optimizer_config, scaler)


def _compile_layers(args: argparse.Namespace, config: TransformerConfig, models: List[torch.nn.Module]) -> None:
    """--use-torch-compile: each layer compiled in place (compilation itself happens in the first step)."""
    if args.use_torch_compile:
        dropout = config.hidden_dropout > 0 or config.attention_dropout > 0
        compile_layers(models, args.torch_compile_backend, dropout)


class NonFiniteTraining(RuntimeError):
    """--max-skipped-iterations steps in a row had a non-finite loss or gradient norm."""


@dataclass
class Trainer:
    args: argparse.Namespace
    state: ParallelState
    acc: Accelerator
    task: Optional[TrainingTask] = None
    transforms: Sequence[ModelTransform] = ()  # the model transforms of the run (transforms/registry.py)
    nan_iterations: int = 0
    non_finite_in_a_row: int = 0  # steps skipped by --check-for-nan-in-loss-and-grad since the last update
    losses: List[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        args = self.args
        if self.task is None:
            self.task = PretrainTask(args)
        model_parallel_seed(args.seed, self.state.tp_rank, self.state.pp_rank)
        self.config = transformer_config_from_args(args)
        self.dp = build_data_parallel_models(args, self.config, self.state, self.acc.device, self.transforms)
        self.models, self.optimizer = self.dp.models, self.dp.optimizer
        self.model = self.models[0]
        self.forward_backward = get_forward_backward_func(self.state.pp, args.virtual_pipeline_model_parallel_size,
                                                          args.schedules_method)
        self.train_state = TrainState(scheduler_from_args(self.optimizer, args))
        self.num_microbatches = args.global_batch_size // (args.micro_batch_size * self.state.dp)
        self._datasets: Optional[Tuple[Optional[Dataset], ...]] = None
        self.flops_per_token = training_flops_per_token(self.config, args.seq_length, frozen_weights=self.frozen_base)
        # --timing-log-level: the step's regions (core/timers.py), device-synchronized at their bounds
        self.region_timers = (RegionTimers(self.acc.synchronize if self.acc.type != "cpu" else lambda: None)
                              if args.timing_log_level else None)
        install_timers(self.region_timers)
        self.forward_flops_per_token = sum(forward_flops_per_token(self.config, args.seq_length))
        self.async_saves = dcp_format.AsyncSaves()  # --async-save: the torch_dist save in flight

    # ---- the run's state (train_state.py) -----------------------------------------------------
    @property
    def scheduler(self) -> Any:
        return self.train_state.scheduler

    @property
    def iteration(self) -> int:
        return self.train_state.iteration

    @iteration.setter
    def iteration(self, value: int) -> None:
        self.train_state.iteration = value

    @property
    def consumed_samples(self) -> int:
        return self.train_state.consumed_samples

    @consumed_samples.setter
    def consumed_samples(self, value: int) -> None:
        self.train_state.consumed_samples = value

    @property
    def skipped_iterations(self) -> int:
        return self.train_state.skipped_iterations

    @skipped_iterations.setter
    def skipped_iterations(self, value: int) -> None:
        self.train_state.skipped_iterations = value

    @property
    def frozen_base(self) -> bool:
        """A transform froze the base weights: they get no gradient, and --load gives only them."""
        return any(transform.freezes_base for transform in self.transforms)

    # ---- data -------------------------------------------------------------------------------
    def _num_samples(self) -> Tuple[int, int, int]:
        """Samples each split must provide (Megatron's formula: every evaluation reads new ones)."""
        args = self.args
        evaluations = args.train_iters // args.eval_interval + 1 if args.eval_interval else 1
        return (args.train_iters * args.global_batch_size,
                evaluations * args.eval_iters * args.global_batch_size,
                args.eval_iters * args.global_batch_size)

    def datasets(self) -> Tuple[Optional[Dataset], Optional[Dataset], Optional[Dataset]]:
        """(train, valid, test) from the task, built once."""
        if self._datasets is None:
            self._datasets = tuple(self.task.build_datasets(self.args, self._num_samples()))
        return self._datasets

    def batches(self, dataset: Dataset, consumed: int = 0) -> Iterator[Batch]:
        """Micro-batches of ``dataset`` for this DP rank, from sample ``consumed`` on."""
        sampler = PretrainingSampler(len(dataset), consumed, self.args.micro_batch_size, self.state.dp_rank,
                                     self.state.dp)
        batches = self.task.batches(dataset, sampler, self.args.num_workers, self.acc.device)
        cp = context_parallel_for(self.config, self.state)
        if cp is None:
            return batches
        return (split_batch(batch, cp) for batch in batches)  # this CP rank's tokens of every sample

    def train_iterator(self) -> Iterator[Batch]:
        dataset = self.datasets()[0]
        if dataset is None:
            raise ArgumentError("the training split is empty: check --split and --data-path")
        return self.batches(dataset, self.consumed_samples)

    def valid_iterator(self) -> Optional[Iterator[Batch]]:
        dataset = self.datasets()[1]
        return None if dataset is None else self.batches(dataset)

    # ---- steps ------------------------------------------------------------------------------
    def reduce_stats(self, stats: List[Dict[str, torch.Tensor]]) -> Dict[str, float]:
        """The global batch's statistics: means over micro-batches and data-parallel ranks.

        Only the last pipeline stage computes them; they are shared over the pipeline group.
        """
        return self._reduce_step(stats, 0.0)[0]

    def _reduce_step(self, stats: List[Dict[str, torch.Tensor]], tokens: float) -> Tuple[Dict[str, float], float]:
        """:meth:`reduce_stats`, and this rank's ``tokens`` summed over DP, in the same all-reduce."""
        names = self.task.stat_names
        totals = stack_stats(stats, names, self.acc.device)  # [len(names)]
        # every pipeline stage counted the same micro-batches: each adds its 1/PP share
        totals = torch.cat([totals, totals.new_tensor([tokens / self.state.pp])])  # [len(names) + 1]
        all_reduce(totals, self.state.dp_group)
        all_reduce(totals, self.state.pp_group)
        values = totals.tolist()
        return {name: float(value) / self.state.dp for name, value in zip(names, values)}, values[-1]

    def reduce_aux_losses(self) -> Dict[str, float]:
        """The layers' auxiliary losses of the step (MoE routers', DSA indexers'; Megatron's log): per layer,
        micro-batch and DP rank, the mean. Under context parallelism each CP rank tracked its share of every
        sequence's loss: the sum over DP x CP adds the shares up."""
        names = aux_loss_names(self.config)
        if not names:
            return {}
        tracked = take_tracked_aux_losses(m for model in self.models for m in model.modules())
        totals = torch.stack([tracked.get(name, torch.zeros(())).float().reshape(()).to(self.acc.device)
                              for name in names])  # [names] summed over this rank's layers and micro-batches
        all_reduce(totals, self.state.group("dp_cp"))
        all_reduce(totals, self.state.pp_group)  # every stage's layers
        scale = self.state.dp * self.num_microbatches
        return {name: float(value) / (scale * max(aux_loss_layers(self.config, name), 1))
                for name, value in zip(names, totals.tolist())}

    def pipeline_options(self) -> PipelineOptions:
        """The pipeline group and the activations' shape ``[s, b, h]`` (``[s/tp, b, h]`` under SP)."""
        args, state = self.args, self.state
        seq = args.seq_length // state.cp  # this CP rank's tokens
        seq = seq // state.tp if args.sequence_parallel else seq
        # in fp32 under --fp32-residual-connection; [s, b, 2h] where Zamba's shared blocks read the embeddings too
        shape = (seq, self.task.micro_batch_rows(args.micro_batch_size), self.config.pipeline_hidden_width)
        return PipelineOptions(state.pp_group, shape, self.config.residual_dtype, self.acc.device,
                               args.variable_seq_lengths, len(self.models), args.schedules_method)

    def train_step(self, data_iterator: Iterator[Batch]) -> StepResult:
        for model in self.models:
            model.train()
        self.dp.zero_grad()
        start = time.perf_counter()
        counted = _CountingIterator(data_iterator)
        samples = self.task.samples_in_step(self.args.global_batch_size, self.iteration)
        try:
            with timed("forward-backward"):
                stats = self.forward_backward(self.task.forward_step, counted, self.models, self.num_microbatches,
                                              scale_loss=self.optimizer.scale_loss, no_sync=self.dp.no_sync,
                                              pipeline=self.pipeline_options())
        except SkipStep as skip:
            return self._skipped_step(skip, samples, counted.seconds)
        with timed("grads-reduce"):
            self.dp.finalize_grads()
        self._synchronize_for_timers()
        reduced, tokens = self._reduce_step(stats, counted.positions * self.state.cp)  # CP: a 1/CP share each
        reduced.update(self.reduce_aux_losses())
        loss = reduced[self.task.loss_name]
        middle = time.perf_counter()
        with timed("optimizer"):
            # --check-for-nan-in-loss-and-grad: a non-finite loss skips the update here, a non-finite grad norm
            # inside the optimizer; under fp16 the loss scaler owns non-finite values (a skip, a lower scale)
            guard_loss = self.args.check_for_nan_in_loss_and_grad and self.optimizer.grad_scaler is None
            applied, grad_norm = (False, None) if guard_loss and not math.isfinite(loss) else self.optimizer.step()
        self._synchronize_for_timers()
        timers = {"forward-backward": middle - start, "optimizer": time.perf_counter() - middle}
        if self.task.generates_data:  # the rollouts, inside the forward-backward time
            timers["rollout"] = counted.seconds
        timers.update(self.region_timers.take() if self.region_timers is not None else {})
        if applied:
            self.scheduler.step(1)
            for model in self.models:  # --moe-router-enable-expert-bias: the step's token counts over DP x CP
                update_expert_biases(model, self.state.group("dp_cp"))
        else:
            self.skipped_iterations += 1
        for transform in self.transforms:  # e.g. FP8's delayed scales from this step's amaxes
            transform.after_step(self.models, self.state, applied)
        if not math.isfinite(loss):
            self.nan_iterations += 1
        self._count_non_finite(loss, grad_norm, applied, stats)
        self.iteration += 1
        self.consumed_samples += samples
        self.losses.append(loss)
        return StepResult(loss, grad_norm, applied, reduced, timers, tokens)

    def _count_non_finite(self, loss: float, grad_norm: Optional[float], applied: bool,
                          stats: List[Dict[str, torch.Tensor]]) -> None:
        """--check-for-nan-in-loss-and-grad: a step skipped for a non-finite loss or grad norm is logged, by rank 0
        and by each rank whose own loss was non-finite; --max-skipped-iterations of them in a row stop the run."""
        non_finite = not math.isfinite(loss) or (grad_norm is not None and not math.isfinite(grad_norm))
        if applied or not non_finite or not self.args.check_for_nan_in_loss_and_grad:
            self.non_finite_in_a_row = 0
            return
        self.non_finite_in_a_row += 1
        iteration = self.iteration + 1
        local = [float(s[self.task.loss_name]) for s in stats if self.task.loss_name in s]
        if not all(math.isfinite(value) for value in local):
            print(f"[rank {self.state.rank}] iteration {iteration}: non-finite {self.task.loss_name} "
                  f"on this rank", file=sys.stderr, flush=True)
        print_rank_0(f"iteration {iteration} skipped: {self.task.loss_name} {loss}, grad norm {grad_norm} "
                     f"(--check-for-nan-in-loss-and-grad); {self.non_finite_in_a_row} in a row")
        limit = self.args.max_skipped_iterations
        if self.non_finite_in_a_row >= limit:
            raise NonFiniteTraining(
                f"{self.non_finite_in_a_row} iterations in a row (to {iteration}) had a non-finite loss or gradient "
                f"norm (--max-skipped-iterations {limit}); nothing was applied or saved from them: lower --lr, "
                "check the data, or resume from the last checkpoint")

    def _skipped_step(self, skip: SkipStep, samples: int, rollout_seconds: float) -> StepResult:
        """A step the task's iterator skipped before any forward: no update, counted, its reason printed by the
        rank that saw it; the samples it drew are consumed."""
        self.dp.zero_grad()
        self.skipped_iterations += 1
        self.iteration += 1
        self.consumed_samples += samples
        if skip.local:
            print(f"[rank {self.state.rank}] iteration {self.iteration} skipped: {skip}", file=sys.stderr, flush=True)
        self.losses.append(float("nan"))
        timers = {"rollout": rollout_seconds} if self.task.generates_data else {}
        return StepResult(float("nan"), None, False, {}, timers, 0.0)

    def _synchronize_for_timers(self) -> None:
        """Wait for the device only when the step timers are written (a sync stalls the host's queue)."""
        if self.args.log_timers_to_tensorboard:
            self.acc.synchronize()

    @torch.no_grad()
    def evaluate(self) -> Dict[str, float]:
        """Every task statistic averaged over ``--eval-iters`` global batches of the validation split."""
        self.dp.finish_param_sync()
        iterator = self.valid_iterator()
        if iterator is None:
            return {name: float("nan") for name in self.task.stat_names}
        for model in self.models:
            model.eval()
        stats = []
        for _ in range(self.args.eval_iters):
            stats.extend(self.forward_backward(self.task.forward_step, iterator, self.models, self.num_microbatches,
                                               forward_only=True, pipeline=self.pipeline_options()))
        for model in self.models:
            model.train()
        return self.reduce_stats(stats)

    # ---- checkpoints ------------------------------------------------------------------------
    @property
    def distributed_optimizer(self) -> bool:
        return self.dp.distributed_optimizer

    def finish_param_sync(self) -> None:
        self.dp.finish_param_sync()

    def save(self) -> str:
        self._refuse_non_finite_weights()
        if self.args.ckpt_format == dcp_format.FORMAT:
            path = dist_checkpoint.save(self)
            print_rank_0(f"{'started saving' if self.args.async_save else 'saved'} checkpoint at iteration "
                         f"{self.iteration:7d} to {self.args.save} ({dcp_format.FORMAT})")
            return path
        path = self._save_classic()
        print_rank_0(f"saved checkpoint at iteration {self.iteration:7d} to {self.args.save}")
        return path

    def _save_classic(self) -> str:
        """Megatron's per-rank files: the model (as the transforms filter it), the optimizer, the run's state."""
        args, state = self.args, self.state
        self.dp.finish_param_sync()
        rng = checkpointing.gather_rng_states(get_all_rng_states(), state.dp_group)
        no_optimizer = args.no_save_optim or not all(transform.saves_optimizer for transform in self.transforms)
        extra = {} if no_optimizer else self.dp.extra_checkpoint_files()  # collective over DP
        # FSDP gathers only what is saved
        trainable_only = any(transform.trainable_state_only for transform in self.transforms)
        payload = {
            "args": checkpointing.namespace_for_checkpoint(args),
            **self.dp.model_state(trainable_only=trainable_only),
            "optimizer": None if no_optimizer else self.dp.optimizer_state(),
            **self.train_state.save({"rng_state": None if args.no_save_rng else rng}),
            "transformer_config": self.config.to_dict(),
        }
        for transform in self.transforms:
            payload = transform.save_state(payload, self.models)
        return checkpointing.save_checkpoint(args.save, self.iteration, payload, tp_rank=state.tp_rank,
                                             pp_rank=state.pp_rank, pp_size=state.pp,
                                             dp_rank=state.group("expert_dp_cp").rank,  # one writer per model part
                                             is_global_rank0=state.rank == 0,
                                             extra_files=extra, ep_rank=state.ep_group.rank, ep_size=state.ep,
                                             keep_last=args.ckpt_keep_last or 0)

    def _refuse_non_finite_weights(self) -> None:
        """A checkpoint never holds NaN/Inf weights unless the run opted out of the guard
        (--no-check-for-nan-in-loss-and-grad): every rank checks its own, the first found is named. Collective."""
        bad = next((f"{name} (rank {self.state.rank})" for model in self.models
                    for name, param in model.named_parameters()
                    if checkpointing.non_finite_count(getattr(param, "_local_tensor", param))), None)
        first = first_on_any_rank(bad)
        if first is None:
            return
        if self.args.check_for_nan_in_loss_and_grad:
            raise checkpointing.CheckpointError(
                f"iteration {self.iteration}: the weight {first} holds NaN/Inf, so it is not saved (the previous "
                "checkpoint stays the newest); the run diverged: resume from that checkpoint with a lower --lr")
        print_rank_0(f"WARNING: iteration {self.iteration}: saving NaN/Inf weights ({first}) as "
                     "--no-check-for-nan-in-loss-and-grad asks")

    def load(self) -> None:
        """``--load``: the weights (through the transforms' state-dict filter), and unless they are all that is
        wanted (--finetune, a release checkpoint, a frozen base) the optimizer and the run's state."""
        args = self.args
        found = find_rank_file(args.load, self.state)
        if found is None:
            wrong = checkpointing.misplaced_checkpoint(args.load)
            if wrong is not None:  # training from random weights would look like success
                raise checkpointing.CheckpointError(wrong)
            print_rank_0(f"WARNING: no {checkpointing.TRACKER_FILENAME} in --load {args.load}; "
                         "starting from scratch")
            return
        path, iteration, release = found
        directory = checkpointing.iteration_dir(args.load, iteration, release)
        if dcp_format.is_dist_checkpoint(directory):  # whatever --ckpt-format says
            dist_checkpoint.load(self, directory, iteration, release)
            print_rank_0(f"loaded checkpoint {directory} (iteration {self.iteration}, {dcp_format.FORMAT})")
            return
        loaded = load_model_weights(self.models, WeightSource(args.load), args, self.state, self._load_weights,
                                    found=found)
        self.resume(loaded.content, path, iteration, weights_only=args.finetune or release or self.frozen_base)
        print_rank_0(f"loaded checkpoint {path} (iteration {self.iteration})")

    def _load_weights(self, content: Dict[str, Any], path: str) -> None:
        """A transform that loads the base itself (one whose added weights are not in it), else the model entries."""
        if not any(transform.load_base(self.models, content, path) for transform in self.transforms):
            self.dp.load_model_state(content)

    def resume(self, content: Dict[str, Any], path: str, iteration: int, weights_only: bool) -> None:
        """After the weights of a classic checkpoint file: unless ``weights_only``, its optimizer state (unless
        --no-load-optim) and the run's state (train_state.py) at ``iteration``."""
        args = self.args
        with_optimizer = not (weights_only or args.no_load_optim or content.get("optimizer") is None)
        if with_optimizer:
            self._load_optimizer(content, path)
        else:
            self.dp.reload_model_params()
        if not weights_only:
            self.train_state.load(content, iteration, path, args, schedule=with_optimizer,
                                  rng_states=rank_rng_states(content, self.state.dp_rank, args))

    def after_load(self) -> None:
        """The transforms' load hooks, in order; a checkpoint one names resumes the run (--finetune: its weights
        only)."""
        context = TransformContext(self.args, self.config, self.state, self.models, self.dp.reload_model_params)
        for transform in self.transforms:
            point = transform.after_load(context)
            if point is not None:
                self.resume(point.content, point.path, point.iteration, weights_only=self.args.finetune)

    def _load_optimizer(self, checkpoint: Dict, path: str) -> None:
        saved_distributed = bool(getattr(checkpoint.get("args"), "use_distributed_optimizer", False))
        if saved_distributed != self.distributed_optimizer:
            raise checkpointing.CheckpointError(
                f"{path} was saved {'with' if saved_distributed else 'without'} --use-distributed-optimizer and "
                "this run differs; match the flag or add --no-load-optim to load the weights only")
        self.dp.load_optimizer_state(checkpoint, os.path.dirname(path))


def validated_task(args: argparse.Namespace, task_class: Type[TrainingTask]) -> TrainingTask:
    """The task, its own checks passed (before any process group); a damaged ``.bin/.idx`` that its checks open
    is a one-line ArgumentError naming the file."""
    try:
        task = task_class(args)
        task.validate(args)
    except IndexedDatasetError as error:
        raise ArgumentError(str(error)) from None
    return task


def setup(argv: Optional[List[str]] = None, task_class: Type[TrainingTask] = PretrainTask) -> Trainer:
    """Flags -> validated args -> devices, groups, model, optimizer (and the resumed state)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args = parse_and_validate(argv, world_size, task_class.entry)  # the task's entry's flags only
    task = validated_task(args, task_class)
    tokenizer_and_vocab(args)  # a missing or unreadable tokenizer stops the run here (TokenizerError)
    transforms = build_transforms(args, transformer_config_from_args(args))  # checked before any process group
    check_device(args)
    acc, state = start_processes(args)
    trainer = Trainer(args, state, acc, task, transforms)
    if args.auto_resume and not args.load:  # validation pointed --load at --save when it exists
        print_rank_0(f"--auto-resume: no checkpoint in --save {args.save} yet; starting fresh")
    if args.load:
        trainer.load()
    trainer.after_load()  # e.g. adapters of their own checkpoint, a base quantised once loaded
    task.attach(trainer)
    return trainer


def iteration_stats(trainer: Trainer, result: StepResult, window: Dict[str, Any]) -> IterationStats:
    """The figures of Megatron's line, averaged over ``window`` (the iterations since the last line)."""
    args = trainer.args
    elapsed = window["time"] / window["iters"]
    training_time = max(window["time"] - window["timers"].get("rollout", 0.0), 1e-9)  # generation is not training
    tokens_per_second = window["tokens"] / training_time  # the positions the trained model processed
    flops_per_token = trainer.flops_per_token + trainer.task.reference_forwards() * trainer.forward_flops_per_token
    tflops = flops_per_token * tokens_per_second / trainer.state.world_size / 1e12
    loss_name = trainer.task.loss_name
    stepped = max(window["stepped"], 1)  # steps a task skipped before any forward have no statistics
    means = {name: total / stepped for name, total in window["stats"].items()} or {loss_name: float("nan")}
    return IterationStats(
        iteration=trainer.iteration, train_iters=args.train_iters, consumed_samples=trainer.consumed_samples,
        elapsed_ms=1000 * elapsed, learning_rate=trainer.scheduler.get_lr(),
        global_batch_size=args.global_batch_size, loss=means[loss_name],
        loss_scale=trainer.optimizer.loss_scale, grad_norm=result.grad_norm,
        skipped_iterations=trainer.skipped_iterations, nan_iterations=trainer.nan_iterations,
        tokens_per_second=tokens_per_second, tflops_per_device=tflops,
        mfu=tflops / peak_tflops(args.peak_tflops, half_precision=args.bf16 or args.fp16),
        memory_gb=trainer.acc.max_memory_gb(),
        other_stats={name: value for name, value in means.items() if name != loss_name})


def _write_iteration(trainer: Trainer, writers: MetricWriters, result: StepResult, elapsed: float) -> None:
    """This iteration's own figures to TensorBoard / W&B (Megatron writes per iteration, not windows)."""
    if not writers.wants(trainer.iteration):
        return
    window = _empty_window()
    _accumulate(window, result, elapsed)
    values = iteration_values(iteration_stats(trainer, result, window))
    writers.scalars(values, trainer.iteration, consumed_samples=trainer.consumed_samples, timers=result.timers)


def _print_validation(trainer: Trainer, stats: Dict[str, float]) -> None:
    """Megatron's block: the objective as ``lm loss`` with its PPL, then the task's other statistics."""
    loss = stats[trainer.task.loss_name]
    line = (f" validation loss at iteration {trainer.iteration} | lm loss value: {loss:.6E} | "
            f"lm loss PPL: {math.exp(min(20.0, loss)):.6E} | ")
    line += "".join(f"{name} value: {value:.6E} | " for name, value in stats.items()
                    if name != trainer.task.loss_name)
    print_rank_last("-" * len(line) + "\n" + line + "\n" + "-" * len(line))


def _empty_window() -> Dict[str, Any]:
    return {"time": 0.0, "iters": 0, "stepped": 0, "tokens": 0.0, "stats": {}, "timers": {}}


def _timing_block(trainer: Trainer, window: Dict[str, Any]) -> str:
    """``--timing-log-level``'s block: each region's milliseconds per step across ranks (every rank joins the
    gather; the text is for the last rank to print)."""
    args = trainer.args
    names = timing_regions(args.timing_log_level)
    local = torch.tensor([1000.0 * window["timers"].get(name, 0.0) / max(window["iters"], 1) for name in names],
                         dtype=torch.float64, device=trainer.acc.device)  # [regions] ms per step
    per_rank = [local]
    if dist.is_initialized() and dist.get_world_size() > 1:
        per_rank = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(per_rank, local)
    return format_timing(names, [t.tolist() for t in per_rank], args.timing_log_option)


def _accumulate(window: Dict[str, Any], result: StepResult, elapsed: float) -> None:
    window["time"] += elapsed
    window["iters"] += 1
    window["stepped"] += 1 if result.stats else 0
    window["tokens"] += result.tokens
    for name, seconds in result.timers.items():
        window["timers"][name] = window["timers"].get(name, 0.0) + seconds
    for name, value in result.stats.items():
        window["stats"][name] = window["stats"].get(name, 0.0) + value


def train(trainer: Trainer) -> Trainer:
    """Run iterations until ``--train-iters`` (or ``--exit-interval``), logging, evaluating, saving."""
    args = trainer.args
    if trainer.iteration >= args.train_iters:  # a finished run that was resumed: nothing to do
        print_rank_0(f"already at iteration {trainer.iteration} of --train-iters {args.train_iters}; nothing to train")
        return trainer
    with build_metric_writers(args, is_last_rank()) as writers, ExitConditions(args, trainer.acc.device) as exits:
        return _train_loop(trainer, writers, exits)


def _train_loop(trainer: Trainer, writers: MetricWriters, exits: ExitConditions) -> Trainer:
    args = trainer.args
    iterator = trainer.train_iterator()
    window = _empty_window()
    saved_at = -1
    profiler = StepProfiler(args, trainer.state.rank, trainer.acc.type)
    compiled = (CompileReport(sum(len(transformer_layers(model)) for model in trainer.models),
                              args.torch_compile_backend) if args.use_torch_compile else None)
    while trainer.iteration < args.train_iters:
        trainer.acc.synchronize()
        profiler.before_step(trainer.iteration)
        start = time.perf_counter()
        result = trainer.train_step(iterator)
        trainer.acc.synchronize()
        elapsed = time.perf_counter() - start
        profiler.after_step(trainer.iteration)
        if compiled is not None and not compiled.printed:
            print_rank_0(compiled.after_step(elapsed))
        _accumulate(window, result, elapsed)
        _write_iteration(trainer, writers, result, elapsed)
        if trainer.iteration % args.log_interval == 0:
            print_rank_last(format_log_line(iteration_stats(trainer, result, window)))
            if args.timing_log_level:
                print_rank_last(_timing_block(trainer, window))
            window = _empty_window()
        if (args.eval_interval and args.eval_iters and trainer.iteration % args.eval_interval == 0
                and trainer.datasets()[1] is not None):
            validation = trainer.evaluate()
            _print_validation(trainer, validation)
            writers.validation(validation, trainer.iteration, consumed_samples=trainer.consumed_samples)
        trainer.async_saves.poll()  # publish a background save that finished
        if args.save and args.save_interval and trainer.iteration % args.save_interval == 0:
            trainer.save()
            saved_at = trainer.iteration
        if args.exit_interval and trainer.iteration % args.exit_interval == 0:
            break
        reason = exits.reason_to_stop()
        if reason is not None:  # every rank agrees: save below and return, so the process exits 0
            print_rank_0(f"stopping at iteration {trainer.iteration}: {reason}; saving and exiting")
            break
    profiler.stop(trainer.iteration)  # a run that ended inside the profiled range
    if args.save and saved_at != trainer.iteration:
        trainer.save()
    trainer.async_saves.wait()
    return trainer


def run(argv: Optional[List[str]] = None, task_class: Type[TrainingTask] = PretrainTask) -> Trainer:
    """Entry point of every training script: returns the trainer (losses in ``trainer.losses``)."""
    try:
        trainer = setup(argv, task_class)
    except (ArgumentError, checkpointing.CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    params = sum(p.numel() for model in trainer.models for p in model.parameters())
    trainable = sum(p.numel() for model in trainer.models for p in model.parameters() if p.requires_grad)
    frozen = f" of {params:,} ({100.0 * trainable / max(params, 1):.2f}%, the rest frozen)" if trainable < params else ""
    print_rank_0(f"training {trainable:,}{frozen} parameters per rank "
                 f"(TP={trainer.state.tp}, PP={trainer.state.pp}, CP={trainer.state.cp}, DP={trainer.state.dp}) on {trainer.acc.type}; "
                 f"{trainer.num_microbatches} micro-batches per step; task {trainer.task.name}")
    print_rank_0(fused_kernels_line(trainer.config, trainer.acc.type))
    lock = _take_save_lock(trainer)
    interrupt = failures.InterruptWatch()
    try:
        with interrupt:
            return train(trainer)
    except (Exception, KeyboardInterrupt) as error:
        _stop_on_failure(trainer, error, interrupt.received)
        raise
    finally:
        if lock is not None:
            lock.release()


def _stop_on_failure(trainer: Trainer, error: BaseException, interrupted: bool) -> None:
    """An exception escaped training. Ctrl-C: one line, exit 130, no save. Otherwise every rank records it in
    --save/failures/ (failures.py) and rank 0 prints the summary line; a known failure (the NaN stop, a
    checkpoint that cannot be written, with --save a collective that failed) ends the process with status 1
    and no traceback, a torch.compile backend that cannot compile with one line and status 2; anything else returns,
    to be re-raised with its traceback."""
    iteration = _failure_iteration(trainer, error)
    if interrupted or isinstance(error, KeyboardInterrupt):
        if trainer.state.rank == 0:
            print(failures.interrupted_line(iteration, trainer.args.save), file=sys.stderr, flush=True)
        raise SystemExit(failures.INTERRUPTED_EXIT_CODE) from None
    place = failures.RankPlace.of(trainer.state)
    compile_message = compile_failure(error)
    if compile_message is not None:
        failures.record_failure(trainer.args.save, place, iteration, error)
        print(f"error: {compile_message}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    # NonFiniteTraining: every rank saw the same global loss and norm, so every rank stops here
    if isinstance(error, TrainingDataError):  # one line, not a DataLoader worker's traceback
        error = TrainingDataError.unwrapped(error)
    line = failures.report(trainer.args.save, place, iteration, error,
                           everyone_fails=isinstance(error, NonFiniteTraining))
    known = (isinstance(error, (NonFiniteTraining, checkpointing.CheckpointError, TrainingDataError))
             or (failures.collective_failure(error) and bool(trainer.args.save)))  # its traceback is in the file
    if line is not None and (known or (trainer.state.rank == 0 and trainer.args.save)):
        print(f"error: {line}", file=sys.stderr, flush=True)
    if known:
        raise SystemExit(1) from None


def _failure_iteration(trainer: Trainer, error: BaseException) -> int:
    """The iteration the failure belongs to: the one in progress when it came from a training step, else the
    last finished one (an evaluation or a save after it)."""
    step_code = Trainer.train_step.__code__
    in_step = any(frame.f_code is step_code for frame, _ in traceback.walk_tb(error.__traceback__))
    return trainer.iteration + 1 if in_step else trainer.iteration


def _take_save_lock(trainer: Trainer) -> Optional[SaveLock]:
    """Rank 0 checks that --save is writable, locks it and moves an earlier run's failure files aside, before
    the first step; every rank stops (exit 2) when --save is not writable or another live run holds it."""
    if not trainer.args.save:
        return None
    lock, refused = SaveLock(trainer.args.save), None
    if trainer.state.rank == 0:
        try:
            _probe_writable(trainer.args.save)
            lock.acquire()
            failures.archive_previous(trainer.args.save)
        except SaveDirectoryInUse as error:
            refused = str(error)
        except OSError as error:
            refused = (f"--save {trainer.args.save} is not writable ({error.strerror or error}: "
                       f"{error.filename or trainer.args.save}); make it writable or point --save elsewhere")
    if any_rank(refused is not None, device=trainer.acc.device):
        if refused is not None:
            print(f"error: {refused}", file=sys.stderr, flush=True)
        raise SystemExit(2)
    return lock


def _probe_writable(directory: str) -> None:
    """Create ``directory`` if needed and write, fsync and remove a probe file in it (OSError: not writable,
    or full), so that an unusable --save stops the run before training, not at its first save."""
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, f".write_probe_{socket.gethostname()}_{os.getpid()}")
    try:
        with open(probe, "wb") as handle:
            handle.write(b"\0")
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        if os.path.exists(probe):
            os.remove(probe)


def pretrain(argv: Optional[List[str]] = None) -> Trainer:
    """``pretrain_gpt.py``: the pretraining task through the one trainer."""
    return run(argv, PretrainTask)
