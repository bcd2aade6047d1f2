"""GRPO (``posttrain.py --stage grpo``): rollouts from the policy being trained, rewards, group advantages,
and the clipped policy loss, in the same processes and on the same weights (no second program, no weight sync).

A step (one optimizer update):

1. **Rollout** (every ``--num-iterations`` steps, at the step's first micro-batch, on every rank at once):
   this data-parallel rank's ``global batch / DP`` prompts (``data.py``), each generated ``--num-generations``
   times by :func:`mindspeed_llm.inference.engine.generate` from the model in memory (``--max-new-tokens``,
   ``--temperature``, ``--top-k``, ``--top-p``; stops at EOS and at the ``--prompt-type`` template's end of
   turn). Every completion draws from its own generator, seeded by ``--seed``, its prompt's position in the
   sample order and its index in the group, so the rollouts are the same at every TP/PP/DP layout.
2. **Rewards**: ``--reward-funcs`` (``rewards.py``) on the decoded prompt and completion, the reference reply
   as the ``answer`` column, plus the score of ``--reward-model`` (an ``orm`` checkpoint of the policy's
   architecture, read at the completion's last token), weighted by ``--reward-weights`` and summed. A
   reward function that fails skips the step (no update; counted in the log line's skipped iterations) and
   its rank prints the function, the sample and the error.
3. **Advantages** per group of ``--num-generations``: ``(r - mean) / (std + 1e-4)``, or ``r - mean`` with
   ``--scale-rewards none`` (``advantages.py``).
4. **Log-probs**: with ``--num-iterations`` above 1 the rollout policy's per-token log-probs are computed once
   (a forward-only pass) and kept for the steps that reuse the batch; with 1 the ratio is 1 (TRL's rule).
   With ``--kl-coef`` the reference's (``--ref-model``, else a frozen copy of the initial policy; with LoRA
   the base with its adapters off) are computed once too.
5. **Loss** (``loss.py``): the clipped ratio (``--clip-ratio``, ``--clip-ratio-high``) times the advantage plus
   ``--kl-coef`` times the k3 KL, aggregated by ``--loss-type``. Per-token log-probs come from the model's
   vocab-parallel cross-entropy, so TP needs no gathered logits.

Batches: ``--global-batch-size`` and ``--micro-batch-size`` count prompts (MindSpeed-RL's convention); a
micro-batch holds ``micro-batch-size x num-generations`` completions, each a row ``prompt + completion``
padded to ``--seq-length`` (to the micro-batch's longest row, rounded to ``--pad-to-multiple-of``, without
pipeline stages or with ``--variable-seq-lengths``). A prompt must leave ``--max-new-tokens`` of the
sequence free. Every group lies in one micro-batch; statistics are over the global batch.

Logged after ``lm loss`` (the policy loss): ``reward mean``, ``reward std`` (over the global batch's
completions), ``kl``, ``clip fraction`` (tokens whose gradient the clip removed), ``response length`` (mean
completion tokens), ``rollout tokens per second`` (generated tokens over every rank per second of rollout);
the line's own tokens per second, TFLOP/s and MFU count the training time only.

Not supported yet, refused in one line: context parallelism, sequence parallelism (a decode step is one
token), virtual pipeline stages and FSDP (the engine runs one plain model chunk per rank), multi-token
prediction, validation during training.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from core.distributed.fsdp import uses_fsdp
from core.tensor_parallel.mappings import any_rank
from mindspeed_llm.arguments import ArgumentError, evaluation_requested
from mindspeed_llm.data.handlers import dataset_settings
from mindspeed_llm.data.templates import end_of_turn_text
from mindspeed_llm.entry_flags import posttrain_entry
from mindspeed_llm.inference.engine import GenerationConfig, generate
from mindspeed_llm.inference.sampling import SamplingConfig
from mindspeed_llm.posttrain.grpo.advantages import check_num_generations, group_advantages
from mindspeed_llm.posttrain.grpo.data import PromptDataset, PromptSample
from mindspeed_llm.posttrain.grpo.loss import policy_loss
from mindspeed_llm.posttrain.grpo.rewards import RewardError, RewardFunc, compute_rewards, load_reward_funcs
from mindspeed_llm.posttrain.orm import last_token_scores
from mindspeed_llm.posttrain.pairwise import (base_model_of, build_reference, load_reference,
                                              uses_base_as_reference)
from mindspeed_llm.posttrain.sft import check_instruction_data, check_prompt_type, padded_length
from mindspeed_llm.posttrain.splits import check_splits, split_sequence_ids, stored_sequences
from mindspeed_llm.runtime import build_chunks
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.training.pretrain_task import check_token_ids
from mindspeed_llm.training.task import Batch, SkipStep, Splits, TrainingTask

ROLLOUT_STATS = ("reward mean", "reward std", "response length", "rollout tokens per second")


def row_seed(seed: int, sample_index: int, generation: int) -> int:
    """The sampling seed of one completion: a hash of the run's seed, its prompt's position and its index."""
    return int(np.random.SeedSequence([seed, sample_index, generation]).generate_state(1, np.uint64)[0] >> 1)


# consumes: --num-generations, --num-iterations, --clip-ratio, --clip-ratio-high, --kl-coef, --loss-type,
# --reward-funcs, --reward-weights, --reward-model, --scale-rewards (read by the task below)
def check_grpo_flags(args: argparse.Namespace) -> None:
    """GRPO's flag rules, one line each, before any process group."""
    try:
        check_num_generations(args.num_generations)
    except ValueError as error:
        raise ArgumentError(str(error)) from None
    refused = [("--context-parallel-size", args.context_parallel_size > 1, "--context-parallel-size 1"),
               ("--sequence-parallel", args.sequence_parallel, "drop --sequence-parallel (a decode step is one "
                "token)"),
               ("virtual pipeline stages", bool(args.virtual_pipeline_model_parallel_size),
                "drop --num-layers-per-virtual-pipeline-stage"),
               ("FSDP", uses_fsdp(args), "use DDP or --use-distributed-optimizer"),
               ("--mtp-num-layers", args.mtp_num_layers is not None, "drop --mtp-num-layers")]
    for feature, given, fix in refused:
        if given:
            raise ArgumentError(f"--stage grpo generates its rollouts with one plain model chunk per rank and does "
                                f"not support {feature} yet: {fix}")
    if args.num_iterations < 1:
        raise ArgumentError(f"--num-iterations {args.num_iterations} must be >= 1 (optimizer steps per rollout)")
    for flag, value in (("--train-iters", args.train_iters), ("--save-interval", args.save_interval),
                        ("--exit-interval", args.exit_interval)):
        if value and value % args.num_iterations:
            raise ArgumentError(f"{flag} {value} is not a multiple of --num-iterations {args.num_iterations}: a "
                                "checkpoint must fall between rollout batches (a resumed run regenerates none)")
    if not 0.0 < args.clip_ratio < 1.0 or (args.clip_ratio_high is not None and args.clip_ratio_high <= 0.0):
        raise ArgumentError(f"--clip-ratio {args.clip_ratio} must lie in (0, 1) and --clip-ratio-high be > 0 "
                            "(e.g. 0.2 and 0.28)")
    if args.kl_coef < 0.0:
        raise ArgumentError(f"--kl-coef {args.kl_coef} must be >= 0 (0: no KL term, no reference model)")
    if not 1 <= args.max_new_tokens < args.seq_length:
        raise ArgumentError(f"--max-new-tokens {args.max_new_tokens} must lie in [1, --seq-length "
                            f"{args.seq_length}): the prompt and its completion share the sequence")
    try:
        sampling_config(args)
        funcs = load_reward_funcs(args.reward_funcs)
    except (ValueError, RewardError) as error:
        raise ArgumentError(str(error)) from None
    rewards = len(funcs) + (args.reward_model is not None)
    if args.reward_weights is not None and len(args.reward_weights) != rewards:
        raise ArgumentError(f"--reward-weights has {len(args.reward_weights)} values for {rewards} rewards "
                            "(--reward-funcs, then --reward-model)")
    if evaluation_requested(args):
        raise ArgumentError("--stage grpo has no validation pass: drop --eval-iters/--eval-interval (or pass "
                            "--eval-iters 0)")


def check_grpo_data(args: argparse.Namespace) -> None:
    """Unpacked instruction records whose every prompt leaves --max-new-tokens of --seq-length free."""
    check_instruction_data(args)
    check_prompt_type(args)
    prefix = args.data_path[0]
    if (dataset_settings(prefix) or {}).get("pack"):
        raise ArgumentError(f"--data-path {prefix} was written with preprocess_data.py --pack; GRPO reads one "
                            "record per sequence: re-run it without --pack")
    count = stored_sequences(prefix, "input_ids")
    check_splits(args, count, "sequences")
    try:
        length, sequence = PromptDataset(prefix, None, args.seed, split_sequence_ids(args, count)[0]).longest_prompt()
    except ValueError as error:
        raise ArgumentError(str(error)) from None
    room = min(args.seq_length, args.max_position_embeddings or args.seq_length) - args.max_new_tokens
    if length > room:
        raise ArgumentError(f"--data-path {prefix}: sequence {sequence} has a prompt of {length} tokens and "
                            f"--max-new-tokens {args.max_new_tokens} leave {room} of --seq-length "
                            f"{args.seq_length}; raise --seq-length or lower --max-new-tokens")


def sampling_config(args: argparse.Namespace) -> SamplingConfig:
    return SamplingConfig(do_sample=True, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p)


def completion_rows(samples: Sequence[PromptSample], completions: Sequence[Sequence[int]], num_generations: int,
                    length: int, pad: int) -> Batch:
    """The training rows of ``samples`` x ``num_generations`` completions (rows grouped by prompt).

    ``tokens`` ``[rows, length]``: prompt + completion, right-padded; ``labels``: the next token (pad past the
    end); ``mask``: 1 where the label is a completion token; ``lengths`` ``[rows]``: prompt + completion.
    """
    rows = len(samples) * num_generations
    tokens = torch.full((rows, length), pad, dtype=torch.long)
    labels = torch.full((rows, length), pad, dtype=torch.long)
    mask = torch.zeros(rows, length)
    lengths = torch.zeros(rows, dtype=torch.long)
    for row, completion in enumerate(completions):
        prompt = samples[row // num_generations].prompt
        sequence = torch.tensor(list(prompt) + list(completion), dtype=torch.long)  # [P + C]
        tokens[row, :len(sequence)] = sequence
        labels[row, :len(sequence) - 1] = sequence[1:]
        mask[row, len(prompt) - 1:len(sequence) - 1] = 1.0  # the labels that are completion tokens
        lengths[row] = len(sequence)
    return {"tokens": tokens, "labels": labels, "mask": mask, "lengths": lengths}


class RolloutIterator:
    """The trainer's micro-batches: a new rollout at each step whose iteration is a multiple of
    ``--num-iterations``, its micro-batches served again by the steps that follow. A skipped rollout leaves
    nothing to reuse: those steps are skipped too."""

    def __init__(self, task: "GRPOTask", dataset: PromptDataset, index_batches: Iterator[List[int]]) -> None:
        self.task, self.dataset, self.index_batches = task, dataset, index_batches
        self.micro_batches: List[Batch] = []
        self.served = 0

    def __iter__(self) -> "RolloutIterator":
        return self

    def __next__(self) -> Batch:
        trainer = self.task.trainer
        count = trainer.num_microbatches
        if self.served % count == 0:  # a step starts
            if trainer.iteration % self.task.args.num_iterations == 0:
                self.micro_batches = []
                samples = [self.dataset[i] for _ in range(count) for i in next(self.index_batches)]
                self.micro_batches = self.task.rollout(samples)
            elif not self.micro_batches:
                raise SkipStep("the rollout batch this step would reuse was skipped", local=False)
        batch = self.micro_batches[self.served % count]
        self.served += 1
        return batch


class GRPOTask(TrainingTask):
    """Group relative policy optimisation on rollouts of the policy being trained (module docstring)."""

    name = "grpo"
    stat_names = ("lm loss",) + ROLLOUT_STATS[:2] + ("kl", "clip fraction") + ROLLOUT_STATS[2:]
    generates_data = True
    entry = posttrain_entry("grpo")  # GRPO's flags, the sampling ones and the reference model's

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.tokenizer = build_tokenizer(args)
        self.trainer = None
        self.reference: Optional[nn.Module] = None  # with --kl-coef
        self.reward_model: Optional[nn.Module] = None  # with --reward-model
        self.reward_funcs: List[RewardFunc] = []  # --reward-funcs, loaded by attach (validate checked them)
        self.last_rollout: Dict[str, object] = {}  # the latest rollout's ids and rewards (for tests and tools)

    # ---- setup ------------------------------------------------------------------------------
    def validate(self, args: argparse.Namespace) -> None:
        check_grpo_flags(args)
        check_grpo_data(args)

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        prefix = args.data_path[0]
        ids = split_sequence_ids(args, stored_sequences(prefix, "input_ids"))[0]
        return PromptDataset(prefix, num_samples[0], args.seed, ids), None, None

    def micro_batch_rows(self, micro_batch_size: int) -> int:
        return micro_batch_size * self.args.num_generations

    def samples_in_step(self, global_batch_size: int, iteration: int) -> int:
        return global_batch_size if iteration % self.args.num_iterations == 0 else 0

    def attach(self, trainer) -> None:
        self.trainer = trainer
        args = self.args
        self.reward_funcs = load_reward_funcs(args.reward_funcs)
        if len(trainer.models) != 1:
            raise ArgumentError("--stage grpo runs one model chunk per rank (no virtual pipeline stages)")
        if args.kl_coef:
            self.reference = (trainer.models[0] if uses_base_as_reference(args)
                              else build_reference(trainer, args.ref_model)[0])
        if args.reward_model:
            self.reward_model = self._load_reward_model(trainer, args.reward_model)

    @staticmethod
    def _load_reward_model(trainer, directory: str) -> nn.Module:
        """The ``--reward-model`` checkpoint (an orm run of the policy's architecture), frozen, this rank's stage."""
        args, state = trainer.args, trainer.state
        config = dataclasses.replace(trainer.config, value_head=True)
        model = build_chunks(args, config, state, trainer.acc.device, virtual=False)[0]
        load_reference([model], directory, trainer, flag="--reward-model",
                       same_tokens="the reward model scores the policy's tokens: use one with the policy's tokenizer")
        model.requires_grad_(False)
        return model.eval()

    def batches(self, dataset, batch_sampler, num_workers: int, device: torch.device) -> Iterator[Batch]:
        return RolloutIterator(self, dataset, iter(batch_sampler))

    # ---- the rollout ------------------------------------------------------------------------
    def generation_config(self) -> GenerationConfig:
        args, tokenizer = self.args, self.tokenizer
        stop = end_of_turn_text(args.prompt_type)
        return GenerationConfig(max_new_tokens=args.max_new_tokens, sampling=sampling_config(args),
                                eos_token_ids=(int(tokenizer.eod),), stop_strings=(stop,) if stop else (),
                                pad_token_id=int(tokenizer.pad), seed=args.seed)

    def rollout(self, samples: List[PromptSample]) -> List[Batch]:
        """Generate, score and prepare this rank's micro-batches of one rollout (every rank calls it together)."""
        args, trainer = self.args, self.trainer
        groups = args.num_generations
        model = trainer.models[0]
        trainer.dp.finish_param_sync()
        start = time.perf_counter()
        prompts = [sample.prompt for sample in samples for _ in range(groups)]
        check_token_ids(torch.tensor([id_ for sample in samples for id_ in sample.prompt + sample.reference]), args)
        config = dataclasses.replace(self.generation_config(), row_seeds=tuple(
            row_seed(args.seed, sample.index, g) for sample in samples for g in range(groups)))
        training = model.training
        try:
            completions = generate(model, prompts, config, decode=self.tokenizer.detokenize).token_ids
        finally:
            model.train(training)
        seconds = time.perf_counter() - start
        rewards = self.rule_rewards(samples, completions)  # [n]
        micro_batches = self.micro_batches(samples, completions)
        if self.reward_model is not None:
            weight = args.reward_weights[-1] if args.reward_weights else 1.0
            rewards = rewards + weight * self.reward_model_scores(micro_batches)
        advantages = group_advantages(rewards, groups, args.scale_rewards == "group")  # [n]
        stats, completion_tokens = self.rollout_stats(rewards, completions, seconds)
        # --loss-type dapo's normaliser per micro-batch: the global batch's completion tokens (one label each) /
        # (micro-batches x DP), so that the trainer's mean over micro-batches and ranks gives sum / global tokens
        global_tokens = torch.tensor(completion_tokens / (len(micro_batches) * trainer.state.dp))
        old = self.forward_log_probs(model, micro_batches) if args.num_iterations > 1 else None
        reference = self.reference_log_probs(micro_batches) if self.reference is not None else None
        rows = len(micro_batches[0]["tokens"])
        for m, batch in enumerate(micro_batches):
            batch["advantages"] = advantages[m * rows:(m + 1) * rows].float().to(batch["tokens"].device)
            batch["rollout_stats"], batch["global_tokens"] = stats, global_tokens
            if old is not None and old[m] is not None:
                batch["old_logp"] = old[m]
            if reference is not None and reference[m] is not None:
                batch["ref_logp"] = reference[m]
        self.last_rollout = {"completions": completions, "rewards": rewards, "advantages": advantages}
        return micro_batches

    def rule_rewards(self, samples: List[PromptSample], completions: List[List[int]]) -> torch.Tensor:
        """The ``--reward-funcs`` rewards ``[n]`` (float64) summed; a failure anywhere skips the step everywhere."""
        args, detokenize = self.args, self.tokenizer.detokenize
        groups, funcs = args.num_generations, self.reward_funcs
        eos = int(self.tokenizer.eod)
        prompt_texts = [text for s in samples for text in [detokenize(s.prompt)] * groups]  # each prompt's rows
        answers = [text for s in samples for text in [detokenize([t for t in s.reference if t != eos])] * groups]
        texts = [detokenize([t for t in ids if t != eos]) for ids in completions]
        weights = args.reward_weights[:len(funcs)] if args.reward_weights else None
        error: Optional[str] = None
        rewards = torch.zeros(len(completions), dtype=torch.float64)
        try:
            rewards = compute_rewards(funcs, prompt_texts, texts, {"answer": answers}, weights).sum(dim=1)
        except RewardError as failure:
            error = describe_failure(failure, samples, groups)
        if any_rank(error is not None, device=self.trainer.acc.device):
            raise SkipStep(error or "a reward function failed on another rank", local=error is not None)
        return rewards

    def micro_batches(self, samples: List[PromptSample], completions: List[List[int]]) -> List[Batch]:
        """The rollout's training micro-batches (``completion_rows``), on the device."""
        args, trainer = self.args, self.trainer
        groups, per_batch = args.num_generations, args.micro_batch_size
        pad, device = int(self.tokenizer.pad), trainer.acc.device
        fixed = trainer.state.pp > 1 and not args.variable_seq_lengths  # stages exchange [seq-length] shapes
        batches = []
        for start in range(0, len(samples), per_batch):
            part = samples[start:start + per_batch]
            rows = completions[start * groups:(start + len(part)) * groups]
            longest = max(len(s.prompt) for s in part) + max(len(c) for c in rows)
            length = args.seq_length if fixed else padded_length(longest, args.pad_to_multiple_of, args.seq_length)
            batch = completion_rows(part, rows, groups, length, pad)
            batches.append({name: value.to(device) for name, value in batch.items()})
        return batches

    def rollout_stats(self, rewards: torch.Tensor, completions: List[List[int]],
                      seconds: float) -> Tuple[torch.Tensor, float]:
        """``ROLLOUT_STATS`` ``[4]`` over the global batch (every data-parallel rank's completions), and the
        global batch's completion tokens."""
        state, device = self.trainer.state, self.trainer.acc.device
        lengths = torch.tensor([float(len(c)) for c in completions], dtype=torch.float64)
        sums = torch.stack([rewards.sum(), (rewards ** 2).sum(), torch.tensor(float(len(rewards)), dtype=torch.float64),
                            lengths.sum()]).to(device)
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        if state.dp > 1:
            dist.all_reduce(sums, group=state.dp_group.handle)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=state.dp_group.handle)
        total, squares, count, tokens = sums.tolist()
        mean = total / count
        std = max(squares / count - mean * mean, 0.0) ** 0.5 * (count / max(count - 1, 1)) ** 0.5
        stats = torch.tensor([mean, std, tokens / count, tokens / max(slowest.item(), 1e-9)], device=device)
        return stats, tokens

    # ---- forward-only passes ----------------------------------------------------------------
    def _forward_only(self, model: nn.Module, micro_batches: List[Batch], score) -> List[Optional[torch.Tensor]]:
        """``score(output, batch)`` of every micro-batch through ``model``'s stages (None off the last stage)."""
        trainer = self.trainer

        def step(batch: Batch, chunk: nn.Module):
            output = chunk(batch["tokens"], labels=batch["labels"] if chunk.value_head is None else None)
            if not chunk.post_process:
                return output, {}
            return output.sum(), {"values": score(output, batch)}

        training = model.training
        model.eval()
        try:
            stats = trainer.forward_backward(step, iter(micro_batches), [model], len(micro_batches),
                                             forward_only=True, pipeline=trainer.pipeline_options())
        finally:
            model.train(training)
        return [s["values"] for s in stats] if stats and stats[0] else [None] * len(micro_batches)

    def forward_log_probs(self, model: nn.Module, micro_batches: List[Batch]) -> List[Optional[torch.Tensor]]:
        """Per-token log-probs ``[rows, s]`` of each micro-batch's labels under ``model`` (last stage)."""
        return self._forward_only(model, micro_batches, lambda output, batch: -output.detach())

    def reference_log_probs(self, micro_batches: List[Batch]) -> List[Optional[torch.Tensor]]:
        """The reference's per-token log-probs (with LoRA and no --ref-model: the base, adapters off)."""
        base = self.reference is self.trainer.models[0]
        with base_model_of(self.reference) if base else contextlib.nullcontext():
            return self.forward_log_probs(self.reference, micro_batches)

    def reward_model_scores(self, micro_batches: List[Batch]) -> torch.Tensor:
        """``--reward-model``'s score ``[n]`` (float64) of each completion's last token, on every rank."""
        scores = self._forward_only(self.reward_model, micro_batches,
                                    lambda output, batch: last_token_scores(output, batch["lengths"]))
        state = self.trainer.state
        rows = sum(len(batch["tokens"]) for batch in micro_batches)
        values = (torch.cat(scores) if scores[0] is not None
                  else torch.zeros(rows, device=self.trainer.acc.device)).double()
        if state.pp > 1:  # the value head sits on the last stage
            dist.broadcast(values, src=state.pp_group.ranks[-1], group=state.pp_group.handle)
        return values.cpu()

    # ---- the step ---------------------------------------------------------------------------
    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        output = model(batch["tokens"], labels=batch["labels"])  # last stage: per-token loss [rows, s]
        if not model.post_process:
            return output, {}
        args = self.args
        logp = -output  # [rows, s]
        result = policy_loss(logp, batch.get("old_logp", logp.detach()), batch["advantages"], batch["mask"],
                             args.loss_type, args.clip_ratio, args.clip_ratio_high, args.kl_coef,
                             batch.get("ref_logp"), max_completion_length=args.max_new_tokens,
                             num_global_tokens=float(batch["global_tokens"]) if args.loss_type == "dapo" else None)
        rollout = batch["rollout_stats"]
        stats = {"lm loss": result.loss.detach(), "kl": result.kl, "clip fraction": result.clip_region}
        stats.update({name: rollout[i] for i, name in enumerate(ROLLOUT_STATS)})
        return result.loss, stats


def describe_failure(failure: RewardError, samples: List[PromptSample], groups: int) -> str:
    """The reward error, with the failing row named as its prompt sample and generation."""
    if failure.sample is None:
        return str(failure)
    return f"{failure} (prompt sample {samples[failure.sample // groups].index}, generation {failure.sample % groups})"
