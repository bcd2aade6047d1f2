"""The pretraining loop behind ``pretrain_gpt.py``.

``pretrain(argv)`` parses and validates the flags (before any process-group
work), sets up devices and process groups, builds the model on the meta
device, materialises it, wraps gradients in fp32 buffers, builds the
optimizer and learning-rate schedule, resumes from ``--load`` if asked, and
trains, logging one Megatron-format line per ``--log-interval`` iterations,
evaluating every ``--eval-interval`` and saving every ``--save-interval``.

:class:`Trainer` holds the pieces so that tests can drive single steps.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch.utils.data import Dataset

from core import checkpointing
from core.datasets.gpt_dataset import build_pretraining_datasets
from core.datasets.mock_dataset import MockGPTDataset
from core.datasets.samplers import PretrainingSampler
from core.device import Accelerator, init_accelerator, peak_tflops
from core.distributed.fsdp import (FSDPOptimizer, finalize_fsdp_grads, fsdp_no_sync, full_model_state_dict,
                                   full_optimizer_state_dict, load_full_model_state_dict,
                                   load_full_optimizer_state_dict, uses_fsdp, wrap_fsdp1, wrap_fsdp2)
from core.distributed.grad_buffer import GradBuffers, finalize_model_grads
from core.models.gpt_model import GPTModel, build_model, build_model_chunks
from core.optimizer.distrib_optimizer import DistributedOptimizer
from core.optimizer.optimizer import MixedPrecisionOptimizer, OptimizerConfig, build_grad_scaler
from core.parallel_state import ParallelState, initialize
from core.pipeline_parallel.layout import stage_layers
from core.pipeline_parallel.schedules import PipelineOptions, get_forward_backward_func
from core.tensor_parallel.mappings import all_reduce
from core.tensor_parallel.random import get_all_rng_states, model_parallel_seed, set_all_rng_states
from mindspeed_llm.arguments import (ArgumentError, check_pretraining_data, parse_and_validate, set_vocab_size,
                                     transformer_config_from_args)
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.training.lr_scheduler import scheduler_from_args
from mindspeed_llm.training.metrics import IterationStats, format_log_line, training_flops_per_token

VALIDATION_SEED_OFFSET = 1


def print_rank_last(message: str) -> None:
    """Print from the last rank (it holds the loss), or from the only one."""
    if not dist.is_initialized() or dist.get_rank() == dist.get_world_size() - 1:
        print(message, flush=True)


def print_rank_0(message: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


def init_distributed(args: argparse.Namespace) -> Accelerator:
    """Choose the device and start the default process group when launched by torchrun."""
    acc = init_accelerator(args.device)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend=args.distributed_backend or acc.backend)
    return acc


def reject_unsupported(args: argparse.Namespace) -> None:
    """Flags accepted for compatibility whose features are not built yet: fail before training."""
    unsupported = {
        "--context-parallel-size > 1": getattr(args, "context_parallel_size", 1) > 1,
        "--expert-model-parallel-size > 1": getattr(args, "expert_model_parallel_size", 1) > 1,
    }
    wanted = [flag for flag, used in unsupported.items() if used]
    if wanted:
        raise ArgumentError(f"{', '.join(wanted)}: not supported yet by this version; remove the flag(s)")


def _collate(samples: List[Dict[str, torch.Tensor]], device: torch.device) -> Dict[str, torch.Tensor]:
    text = torch.stack([s["text"] for s in samples])  # [b, s + 1]
    tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
    return {"tokens": tokens.to(device), "labels": labels.to(device),
            "loss_mask": torch.ones_like(labels, dtype=torch.float32, device=device)}


def batch_iterator(dataset: Dataset, sampler: PretrainingSampler,
                   device: torch.device) -> Iterator[Dict[str, torch.Tensor]]:
    for indices in sampler:
        yield _collate([dataset[i] for i in indices], device)


def forward_step(batch: Dict[str, torch.Tensor], model: GPTModel):
    """Mean per-token loss of one micro-batch, with the sums for logging (a pipeline stage
    without the output layer returns its output activations and no stats)."""
    per_token = model(batch["tokens"], labels=batch["labels"])  # [b, s] fp32
    if not model.post_process:
        return per_token, {}  # [s, b, h] activations for the next stage
    mask = batch["loss_mask"]
    loss = (per_token * mask).sum() / mask.sum()
    return loss, {"lm loss": loss.detach()}


@dataclass
class StepResult:
    loss: float
    grad_norm: Optional[float]
    applied: bool


@dataclass
class Trainer:
    args: argparse.Namespace
    state: ParallelState
    acc: Accelerator
    iteration: int = 0
    consumed_samples: int = 0
    skipped_iterations: int = 0
    nan_iterations: int = 0
    losses: List[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        args = self.args
        model_parallel_seed(args.seed, self.state.tp_rank, self.state.pp_rank)
        self.config = transformer_config_from_args(args)
        scaler = build_grad_scaler(args.fp16, args.loss_scale, args.initial_loss_scale, args.min_loss_scale,
                                   args.loss_scale_window, args.hysteresis)
        opt_config = OptimizerConfig(optimizer=args.optimizer, lr=args.lr, weight_decay=args.weight_decay,
                                     adam_beta1=args.adam_beta1, adam_beta2=args.adam_beta2,
                                     adam_eps=args.adam_eps, clip_grad=args.clip_grad,
                                     swap_optimizer=args.swap_optimizer,
                                     swap_chunk_elements=args.swap_optimizer_chunk_size)
        self.fsdp = uses_fsdp(args)
        if self.fsdp:
            self._build_fsdp(opt_config)
        else:
            self._build_ddp(opt_config, scaler)
        self.forward_backward = get_forward_backward_func(self.state.pp, args.virtual_pipeline_model_parallel_size,
                                                          args.schedules_method)
        self.scheduler = scheduler_from_args(self.optimizer, args)
        self.num_microbatches = args.global_batch_size // (args.micro_batch_size * self.state.dp)
        self._datasets: Optional[Tuple[Optional[Dataset], ...]] = None
        self.flops_per_token = training_flops_per_token(self.config, args.seq_length)

    def _build_ddp(self, opt_config: OptimizerConfig, scaler) -> None:
        """Model chunks (one per virtual pipeline stage), their gradient buffers, the optimizer."""
        args, state = self.args, self.state
        placement = stage_layers(args.num_layers, state.pp, args.virtual_pipeline_model_parallel_size,
                                 args.num_layer_list)
        self.models = build_model_chunks(self.config, state.tp_group, self.acc.device, args.seed, placement,
                                         state.pp_rank)
        self.grad_buffers = [GradBuffers(m, grad_dtype=self._grad_dtype(), dp_group=state.dp_group,
                                         bucket_size=args.ddp_bucket_size, overlap_grad_reduce=args.overlap_grad_reduce,
                                         distributed_optimizer=args.use_distributed_optimizer) for m in self.models]
        self.model, self.buffers = self.models[0], self.grad_buffers[0]  # chunk 0's
        if args.use_distributed_optimizer:
            self.optimizer = DistributedOptimizer(self.models, self.grad_buffers, opt_config, state, scaler,
                                                  overlap_param_gather=args.overlap_param_gather)
        else:
            self.optimizer = MixedPrecisionOptimizer(self.models, opt_config, state, scaler)

    def _build_fsdp(self, opt_config: OptimizerConfig) -> None:
        """One fp32 model sharded over DP by PyTorch's FSDP (bf16 as its compute dtype)."""
        from torch.distributed.fsdp import MixedPrecision

        args, state = self.args, self.state
        config = dataclasses.replace(self.config, params_dtype=torch.float32)  # FSDP keeps fp32 shards
        model = build_model(config, state.tp_group, self.acc.device, args.seed)
        if args.use_torch_fsdp2:
            model = wrap_fsdp2(model, state, param_dtype=torch.bfloat16 if args.bf16 else None,
                               hsdp_replicate=args.hsdp_replicate_size)
        else:
            precision = MixedPrecision(torch.bfloat16, torch.float32) if args.bf16 else None
            strategy = "HYBRID_SHARD" if args.hsdp_replicate_size > 1 else "FULL_SHARD"
            model = wrap_fsdp1(model, state, mixed_precision=precision, sharding_strategy=strategy,
                               hsdp_replicate=args.hsdp_replicate_size)
        self.models, self.grad_buffers = [model], []
        self.model, self.buffers = model, None
        self.optimizer = FSDPOptimizer(model, opt_config, state)

    def _grad_dtype(self) -> torch.dtype:
        """fp32 gradient accumulation, except fp16 models without --accumulate-allreduce-grads-in-fp32."""
        if self.args.fp16 and not self.args.accumulate_allreduce_grads_in_fp32:
            return torch.float16
        return torch.float32

    # ---- data -------------------------------------------------------------------------------
    def _num_samples(self) -> Tuple[int, int, int]:
        """Samples each split must provide (Megatron's formula: every evaluation reads new ones)."""
        args = self.args
        evaluations = args.train_iters // args.eval_interval + 1 if args.eval_interval else 1
        return (args.train_iters * args.global_batch_size,
                evaluations * args.eval_iters * args.global_batch_size,
                args.eval_iters * args.global_batch_size)

    def datasets(self) -> Tuple[Optional[Dataset], Optional[Dataset], Optional[Dataset]]:
        """(train, valid, test): synthetic with --mock-data, else indexed data built once (rank 0 first)."""
        if self._datasets is None:
            args, (train, valid, test) = self.args, self._num_samples()
            if args.mock_data:
                self._datasets = (MockGPTDataset(train, args.seq_length, args.vocab_size, args.seed),
                                  MockGPTDataset(max(valid, 1), args.seq_length, args.vocab_size,
                                                 args.seed + VALIDATION_SEED_OFFSET), None)
            else:
                self._datasets = build_pretraining_datasets(
                    args.data_path, args.split, args.train_data_path, args.valid_data_path, args.test_data_path,
                    args.seq_length, args.seed, (train, valid, test), cache_path=args.data_cache_path,
                    is_rank0_first_barrier=checkpointing.barrier)
        return self._datasets

    def train_iterator(self) -> Iterator[Dict[str, torch.Tensor]]:
        dataset = self.datasets()[0]
        if dataset is None:
            raise ArgumentError("the training split is empty: check --split and --data-path")
        sampler = PretrainingSampler(len(dataset), self.consumed_samples, self.args.micro_batch_size,
                                     self.state.dp_rank, self.state.dp)
        return batch_iterator(dataset, sampler, self.acc.device)

    def valid_iterator(self) -> Optional[Iterator[Dict[str, torch.Tensor]]]:
        dataset = self.datasets()[1]
        if dataset is None:
            return None
        sampler = PretrainingSampler(len(dataset), 0, self.args.micro_batch_size, self.state.dp_rank, self.state.dp)
        return batch_iterator(dataset, sampler, self.acc.device)

    # ---- steps ------------------------------------------------------------------------------
    def _mean_loss(self, stats: List[Dict[str, torch.Tensor]]) -> float:
        """The global batch's loss: mean over micro-batches and data-parallel ranks.

        Only the last pipeline stage computes it; it is shared over the pipeline group.
        """
        if stats:
            total = torch.stack([s["lm loss"] for s in stats]).mean().reshape(1)
        else:
            total = torch.zeros(1, device=self.acc.device)
        all_reduce(total, self.state.dp_group)
        all_reduce(total, self.state.pp_group)
        return float(total.item()) / self.state.dp

    def pipeline_options(self) -> PipelineOptions:
        """The pipeline group and the activations' shape ``[s, b, h]`` (``[s/tp, b, h]`` under SP)."""
        args, state = self.args, self.state
        seq = args.seq_length // state.tp if args.sequence_parallel else args.seq_length
        return PipelineOptions(state.pp_group, (seq, args.micro_batch_size, args.hidden_size), self.config.params_dtype,
                               self.acc.device, args.variable_seq_lengths, len(self.models), args.schedules_method)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """No gradient reduction starts in any chunk's buffers (nor in FSDP)."""
        if self.fsdp:
            with fsdp_no_sync(self.model):
                yield
            return
        with contextlib.ExitStack() as stack:
            for buffers in self.grad_buffers:
                stack.enter_context(buffers.no_sync())
            yield

    def train_step(self, data_iterator: Iterator[Dict[str, torch.Tensor]]) -> StepResult:
        for model, buffers in zip(self.models, self.grad_buffers):
            model.train()
            buffers.zero()
        stats = self.forward_backward(forward_step, data_iterator, self.models, self.num_microbatches,
                                      scale_loss=self.optimizer.scale_loss, no_sync=self.no_sync,
                                      pipeline=self.pipeline_options())
        if self.fsdp:
            finalize_fsdp_grads(self.model, self.state)
        else:
            finalize_model_grads(self.models, self.grad_buffers, self.state)
        applied, grad_norm = self.optimizer.step()
        if applied:
            self.scheduler.step(1)
        else:
            self.skipped_iterations += 1
        loss = self._mean_loss(stats)
        if not math.isfinite(loss):
            self.nan_iterations += 1
        self.iteration += 1
        self.consumed_samples += self.args.global_batch_size
        self.losses.append(loss)
        return StepResult(loss, grad_norm, applied)

    @torch.no_grad()
    def evaluate(self) -> float:
        self.finish_param_sync()
        for model in self.models:
            model.eval()
        iterator = self.valid_iterator()
        if iterator is None:
            return float("nan")
        stats = []
        for _ in range(self.args.eval_iters):
            stats.extend(self.forward_backward(forward_step, iterator, self.models, self.num_microbatches,
                                               forward_only=True, pipeline=self.pipeline_options()))
        for model in self.models:
            model.train()
        return self._mean_loss(stats)

    # ---- checkpoints ------------------------------------------------------------------------
    @property
    def distributed_optimizer(self) -> bool:
        return isinstance(self.optimizer, DistributedOptimizer)

    def finish_param_sync(self) -> None:
        """Weights complete on every rank (an overlapped all-gather may still be in flight)."""
        if self.distributed_optimizer:
            self.optimizer.finish_param_sync()

    def save(self) -> str:
        args, state = self.args, self.state
        self.finish_param_sync()
        rng = checkpointing.gather_rng_states(get_all_rng_states(), state.dp_group)
        extra = {}
        if self.distributed_optimizer and not args.no_save_optim:  # collective over DP
            extra[checkpointing.DISTRIB_OPTIM_FILENAME] = self.optimizer.sharded_state()
        payload = {
            "args": checkpointing.namespace_for_checkpoint(args),
            **self._model_state(),
            "optimizer": None if args.no_save_optim else self._optimizer_state(),
            "opt_param_scheduler": self.scheduler.state_dict(),
            "rng_state": None if args.no_save_rng else rng,
            "consumed_train_samples": self.consumed_samples,
            "skipped_iterations": self.skipped_iterations,
            "transformer_config": self.config.to_dict(),
        }
        path = checkpointing.save_checkpoint(args.save, self.iteration, payload, tp_rank=state.tp_rank,
                                             pp_rank=state.pp_rank, pp_size=state.pp, dp_rank=state.dp_rank,
                                             is_global_rank0=state.rank == 0, extra_files=extra)
        print_rank_0(f"saved checkpoint at iteration {self.iteration:7d} to {args.save}")
        return path

    def load(self) -> None:
        args, state = self.args, self.state
        found = checkpointing.find_checkpoint(args.load, state.tp_rank, state.pp_rank, state.pp)
        if found is None:
            print_rank_0(f"WARNING: no {checkpointing.TRACKER_FILENAME} in --load {args.load}; "
                         "starting from scratch")
            return
        path, iteration, release = found
        checkpoint = checkpointing.load_file(path)
        checkpointing.check_layout(checkpoint, path, state.tp, state.pp, len(self.models))
        try:
            if self.fsdp:
                load_full_model_state_dict(self.model, checkpoint["model"])
            else:
                checkpointing.load_model_state_dicts(self.models, checkpoint)
        except (RuntimeError, KeyError) as error:
            raise checkpointing.CheckpointError(
                f"{path}: weights do not fit this model ({str(error).splitlines()[0][:300]}); check the model "
                "flags against the checkpoint's") from None
        weights_only = args.finetune or release
        if weights_only or args.no_load_optim or checkpoint.get("optimizer") is None:
            self.optimizer.reload_model_params()
        else:
            self._load_optimizer(checkpoint, path)
            self.scheduler.load_state_dict(checkpoint["opt_param_scheduler"])
        if not weights_only:
            self.iteration = iteration
            self.consumed_samples = int(checkpoint.get("consumed_train_samples", 0))
            self.skipped_iterations = int(checkpoint.get("skipped_iterations", 0))
            if not args.no_load_rng and checkpoint.get("rng_state") is not None:
                rng = checkpoint["rng_state"]
                set_all_rng_states(rng[state.dp_rank] if state.dp_rank < len(rng) else rng[0])
        print_rank_0(f"loaded checkpoint {path} (iteration {self.iteration})")


    def _model_state(self) -> Dict:
        """Megatron's ``model`` (or ``model0``, ...) entries; FSDP gathers the DP shards (collective)."""
        if self.fsdp:
            return {"model": full_model_state_dict(self.model, self.state)}
        return checkpointing.model_state_dicts(self.models)

    def _optimizer_state(self) -> Dict:
        if self.fsdp:  # collective over DP
            return {"optimizer": full_optimizer_state_dict(self.model, self.optimizer, self.state)}
        return self.optimizer.state_dict()

    def _load_optimizer(self, checkpoint: Dict, path: str) -> None:
        saved_distributed = bool(getattr(checkpoint.get("args"), "use_distributed_optimizer", False))
        if saved_distributed != self.distributed_optimizer:
            raise checkpointing.CheckpointError(
                f"{path} was saved {'with' if saved_distributed else 'without'} --use-distributed-optimizer and "
                "this run differs; match the flag or add --no-load-optim to load the weights only")
        if self.fsdp:
            load_full_optimizer_state_dict(self.model, self.optimizer, checkpoint["optimizer"]["optimizer"])
            return
        self.optimizer.load_state_dict(checkpoint["optimizer"])
        if self.distributed_optimizer:
            shards = os.path.join(os.path.dirname(path), checkpointing.DISTRIB_OPTIM_FILENAME)
            self.optimizer.load_sharded_state(checkpointing.load_file(shards))


def setup(argv: Optional[List[str]] = None) -> Trainer:
    """Flags -> validated args -> devices, groups, model, optimizer (and the resumed state)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args = parse_and_validate(argv, world_size)
    reject_unsupported(args)
    check_pretraining_data(args)
    if args.vocab_size is None:  # the model's vocabulary is the tokenizer's
        set_vocab_size(args, build_tokenizer(args).vocab_size)
    acc = init_distributed(args)
    args.distributed_backend = args.distributed_backend or acc.backend
    state = initialize(tp=args.tensor_model_parallel_size, pp=args.pipeline_model_parallel_size,
                       vpp=args.virtual_pipeline_model_parallel_size, backend=args.distributed_backend)
    trainer = Trainer(args, state, acc)
    if args.load:
        trainer.load()
    return trainer


def _log(trainer: Trainer, result: StepResult, window: Dict[str, float]) -> None:
    args = trainer.args
    elapsed = window["time"] / window["iters"]
    tokens_per_second = args.global_batch_size * args.seq_length / elapsed
    world = trainer.state.world_size
    tflops = trainer.flops_per_token * tokens_per_second / world / 1e12
    stats = IterationStats(
        iteration=trainer.iteration, train_iters=args.train_iters, consumed_samples=trainer.consumed_samples,
        elapsed_ms=1000 * elapsed, learning_rate=trainer.scheduler.get_lr(),
        global_batch_size=args.global_batch_size, loss=window["loss"] / window["iters"],
        loss_scale=trainer.optimizer.loss_scale, grad_norm=result.grad_norm,
        skipped_iterations=trainer.skipped_iterations, nan_iterations=trainer.nan_iterations,
        tokens_per_second=tokens_per_second, tflops_per_device=tflops,
        mfu=tflops / peak_tflops(args.peak_tflops, half_precision=args.bf16 or args.fp16),
        memory_gb=trainer.acc.max_memory_gb())
    print_rank_last(format_log_line(stats))


def _print_validation(trainer: Trainer, loss: float) -> None:
    ppl = math.exp(min(20.0, loss))
    line = f" validation loss at iteration {trainer.iteration} | lm loss value: {loss:.6E} | lm loss PPL: {ppl:.6E} | "
    print_rank_last("-" * len(line) + "\n" + line + "\n" + "-" * len(line))


def train(trainer: Trainer) -> Trainer:
    """Run iterations until ``--train-iters`` (or ``--exit-interval``), logging, evaluating, saving."""
    args = trainer.args
    if trainer.iteration >= args.train_iters:  # a finished run that was resumed: nothing to do
        print_rank_0(f"already at iteration {trainer.iteration} of --train-iters {args.train_iters}; nothing to train")
        return trainer
    iterator = trainer.train_iterator()
    window = {"time": 0.0, "iters": 0, "loss": 0.0}
    saved_at = -1
    while trainer.iteration < args.train_iters:
        trainer.acc.synchronize()
        start = time.perf_counter()
        result = trainer.train_step(iterator)
        trainer.acc.synchronize()
        window["time"] += time.perf_counter() - start
        window["iters"] += 1
        window["loss"] += result.loss
        if trainer.iteration % args.log_interval == 0:
            _log(trainer, result, window)
            window = {"time": 0.0, "iters": 0, "loss": 0.0}
        if (args.eval_interval and args.eval_iters and trainer.iteration % args.eval_interval == 0
                and trainer.datasets()[1] is not None):
            _print_validation(trainer, trainer.evaluate())
        if args.save and args.save_interval and trainer.iteration % args.save_interval == 0:
            trainer.save()
            saved_at = trainer.iteration
        if args.exit_interval and trainer.iteration % args.exit_interval == 0:
            break
    if args.save and saved_at != trainer.iteration:
        trainer.save()
    return trainer


def pretrain(argv: Optional[List[str]] = None) -> Trainer:
    """Entry point: returns the trainer (losses in ``trainer.losses``)."""
    try:
        trainer = setup(argv)
    except (ArgumentError, checkpointing.CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    params = sum(p.numel() for model in trainer.models for p in model.parameters())
    print_rank_0(f"training {params:,} parameters per rank "
                 f"(TP={trainer.state.tp}, PP={trainer.state.pp}, DP={trainer.state.dp}) on {trainer.acc.type}; "
                 f"{trainer.num_microbatches} micro-batches per step")
    return train(trainer)
