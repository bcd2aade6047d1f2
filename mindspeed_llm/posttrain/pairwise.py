"""Preference stages on pairwise data: DPO (``--stage dpo``), SimPO (``--stage simpo``); the reward model is in ``orm.py``.

``--data-path PREFIX --is-pairwise-dataset`` names the files of a pairwise handler of ``preprocess_data.py``
(``core/datasets/pairwise_dataset.py`` reads them). A micro-batch of ``b`` pairs is ``2b`` rows, the chosen
replies first (``collate_pairs``); pipeline stages exchange ``[s, 2b, h]``.

A reply's log-probability is the sum over its trained tokens of the per-token log-probs, i.e. minus the
model's per-token loss (vocab-parallel over TP); under context parallelism the sums (and token counts)
are all-reduced over CP with an identity backward, as ``token_mean`` does. The objective is the mean over
the micro-batch's pairs of the per-pair loss (``preference_loss.py``), logged as ``lm loss`` with TRL's
statistics beside it.

DPO's reference model is a frozen copy of the initial policy (the model as built and loaded from
``--load``), or the checkpoint ``--ref-model DIR`` (ours, same architecture and vocabulary). It runs
beside the policy in the same pipeline pass: each stage sends ``[s, 4b, h]``, the policy's rows then
the reference's (no gradient flows into the latter). With ``--precompute-ref-log-probs`` the
reference log-probs of every pair of the training and validation (and test) splits are computed once
before training (a forward-only pipeline pass over the pairs; each data-parallel rank computes them all)
and the reference is dropped; validation batches read the same table, so they equal the frozen copy's. Under FSDP
the reference is a whole (unsharded) copy on every rank. With LoRA (``--lora-target-modules``, ``--qlora`` too)
and no ``--ref-model`` there is no copy: the reference is the policy itself with its adapters switched off
(``core.tensor_parallel.lora.adapters_disabled``) in eval mode, i.e. the frozen (possibly NF4) base.
``--split a,b,c`` cuts the pairs into train / validation / test ranges (``splits.py``; every pair trains
without it); validation (``--eval-iters``, ``--eval-interval``) reports every statistic of the stage.
Resuming a DPO run (``--load`` of a DPO checkpoint without ``--finetune``) needs ``--ref-model`` naming
the initial model (the loaded policy has moved on); without it the resume is refused in one line.
"""
from __future__ import annotations

import argparse
import contextlib
import os
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from core import checkpointing
from core.datasets.pairwise_dataset import PAIRWISE_FILES, PairwiseDataset, collate_pairs, pairwise_files_exist
from core.datasets.sft_dataset import PACKED_FILES, check_packed_files, packed_prefix
from core.distributed.fsdp import full_model_state_dict, uses_fsdp
from core.tensor_parallel.lora import adapters_disabled
from core.transformer.context_parallel import context_parallel_for, split_batch
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.entry_flags import posttrain_entry
from mindspeed_llm.posttrain.preference_loss import dpo_loss, simpo_loss
from mindspeed_llm.posttrain.splits import build_split_datasets, check_splits, split_sequence_ids, stored_sequences
from mindspeed_llm.posttrain.sft import check_prompt_type
from mindspeed_llm.runtime import WeightSource, build_chunks, load_model_weights
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.training.pretrain_task import check_token_ids
from mindspeed_llm.training.task import Batch, Splits, TrainingTask, context_parallel_sum

PAIR_STATS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
              "logps/rejected")
PRECOMPUTE_MICROBATCHES = 32  # micro-batches per forward-only pass when precomputing reference log-probs


def check_pairwise_data(args: argparse.Namespace) -> None:
    """One pairwise dataset prefix whose files exist; an instruction dataset is named as such (one line)."""
    stage = args.stage
    if not args.is_pairwise_dataset:
        raise ArgumentError(f"--stage {stage} trains on preference pairs: add --is-pairwise-dataset with --data-path "
                            "PREFIX written by preprocess_data.py with a pairwise handler")
    if args.is_instruction_dataset:
        raise ArgumentError(f"--is-instruction-dataset belongs to --stage sft; --stage {stage} reads a pairwise "
                            "dataset (--is-pairwise-dataset): drop --is-instruction-dataset")
    if args.mock_data or not args.data_path or len(args.data_path) != 1:
        raise ArgumentError(f"--stage {stage} needs one --data-path PREFIX of a pairwise dataset (no weights, no "
                            "--mock-data)")
    prefix = args.data_path[0]
    if pairwise_files_exist(prefix):
        check_packed_files(prefix, PAIRWISE_FILES)  # sound and of one run (cheap); IndexedDatasetError
        return
    instruction = packed_prefix(prefix, PACKED_FILES[0]) + ".idx"
    if os.path.isfile(instruction):
        raise ArgumentError(f"--data-path {prefix} is an instruction dataset ({instruction}); --stage {stage} needs "
                            "a pairwise dataset (preprocess_data.py --handler-name AlpacaStylePairwiseHandler)")
    raise ArgumentError(f"--data-path {prefix}: {packed_prefix(prefix, 'chosen_input_ids')}.idx not found; run "
                        "preprocess_data.py with a pairwise handler (--handler-name AlpacaStylePairwiseHandler) first")


def check_pairwise_layout(args: argparse.Namespace) -> None:
    """Flags that would be silently ignored by a pairwise stage are refused."""
    stage = args.stage
    for flag, given in (("--reset-position-ids/--reset-attention-mask/--eod-mask-loss",
                         args.reset_position_ids or args.reset_attention_mask or args.eod_mask_loss),
                        ("--label-smoothing-factor", bool(args.label_smoothing_factor)),
                        ("--mtp-num-layers", args.mtp_num_layers is not None),
                        ("--variable-seq-lengths", args.variable_seq_lengths)):
        if given:
            raise ArgumentError(f"{flag} does not apply to --stage {stage} (each pair's replies are scored whole, "
                                "padded to --seq-length): drop it")


def _check_smoothing(flag: str, value: float) -> None:
    if not 0.0 <= value < 0.5:
        raise ArgumentError(f"{flag} {value} is outside [0, 0.5) (the share of flipped labels); use e.g. 0.1")


def sequence_log_probs(per_token_loss: torch.Tensor, loss_mask: torch.Tensor,
                       model: nn.Module) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's summed log-prob of its trained tokens and their count (``[rows]`` each, fp32).

    ``per_token_loss`` ``[rows, s]`` is minus the per-token log-prob; under context parallelism the sums
    run over every CP rank's tokens (all-reduced forward, identity backward: each rank's backward carries
    its own tokens' share and the gradient reduction over CP adds them).
    """
    sums = context_parallel_sum(torch.stack([-(per_token_loss * loss_mask).sum(-1), loss_mask.sum(-1)]),
                                model)  # [2, rows]
    return sums[0], sums[1]


def chosen_and_rejected(values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``[2b]`` rows (chosen first) -> chosen ``[b]``, rejected ``[b]``."""
    half = values.size(0) // 2
    return values[:half], values[half:]


def pair_stats(loss: torch.Tensor, chosen_rewards: torch.Tensor, rejected_rewards: torch.Tensor,
               chosen_logps: torch.Tensor, rejected_logps: torch.Tensor) -> Dict[str, torch.Tensor]:
    """TRL's statistics of a micro-batch (means over its pairs), all detached."""
    return {"lm loss": loss.detach(),
            "rewards/chosen": chosen_rewards.mean(), "rewards/rejected": rejected_rewards.mean(),
            "rewards/accuracies": (chosen_rewards > rejected_rewards).float().mean(),
            "rewards/margins": (chosen_rewards - rejected_rewards).mean(),
            "logps/chosen": chosen_logps.detach().mean(), "logps/rejected": rejected_logps.detach().mean()}


class PairwiseTask(TrainingTask):
    """What the preference stages share: pairwise data, 2b-row micro-batches, sequence log-probs."""

    name = "pairwise"
    stat_names = ("lm loss",) + PAIR_STATS

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.pad = build_tokenizer(args).pad

    def validate(self, args: argparse.Namespace) -> None:
        check_pairwise_data(args)
        check_pairwise_layout(args)
        check_prompt_type(args)  # the template the pairs were tokenized with, as SFT checks it
        check_splits(args, stored_sequences(args.data_path[0], PAIRWISE_FILES[0]), "pairs")

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        """The --split ranges of the stored pairs (everything to training by default)."""
        # consumes: --is-pairwise-dataset (the pairwise files it names are what this reads)
        ids = split_sequence_ids(args, stored_sequences(args.data_path[0], PAIRWISE_FILES[0]))
        return build_split_datasets(self.pairwise_dataset, ids, num_samples)

    def pairwise_dataset(self, sequence_ids: Optional[np.ndarray], num_samples: Optional[int],
                         shuffle: bool = True) -> PairwiseDataset:
        """Pairs ``sequence_ids`` (default: all), ``num_samples`` of them in shuffled epochs (default: each once)."""
        args = self.args
        return PairwiseDataset(args.data_path[0], args.seq_length, num_samples, args.seed, pad_token_id=self.pad,
                               shuffle=shuffle, sequence_ids=sequence_ids)

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Batch:
        batch = collate_pairs(samples)
        check_token_ids(torch.stack([batch["tokens"], batch["labels"]]), self.args)
        return batch

    def micro_batch_rows(self, micro_batch_size: int) -> int:
        return 2 * micro_batch_size  # the chosen and the rejected reply of each pair

    @staticmethod
    def run_model(model: nn.Module, batch: Batch, hidden_states: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Per-token loss ``[2b, s]`` on a last stage, else the stage's activations ``[s, 2b, h]``."""
        return model(batch["tokens"], labels=batch["labels"], hidden_states=hidden_states)


class DPOTask(PairwiseTask):
    """Direct preference optimisation against a frozen reference (or its precomputed log-probs)."""

    name = "dpo"
    entry = posttrain_entry("dpo")

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        if args.pref_ftx:
            self.stat_names = self.stat_names + ("sft loss",)
        self.references: Dict[int, nn.Module] = {}  # id(policy chunk) -> its frozen reference chunk
        self.reference_table: Optional[torch.Tensor] = None  # [pairs, 2] with --precompute-ref-log-probs

    def validate(self, args: argparse.Namespace) -> None:
        super().validate(args)
        if args.dpo_beta <= 0:
            raise ArgumentError(f"--dpo-beta {args.dpo_beta} must be positive (e.g. 0.1)")
        _check_smoothing("--dpo-label-smoothing", args.dpo_label_smoothing)
        if args.dpo_label_smoothing and args.dpo_loss_type != "sigmoid":
            raise ArgumentError("--dpo-label-smoothing applies to --dpo-loss-type sigmoid only; drop it")
        if uses_base_as_reference(args) and args.lora_modules_to_save and not args.precompute_ref_log_probs:
            raise ArgumentError(f"--stage dpo with --lora-modules-to-save {' '.join(args.lora_modules_to_save)}: the "
                                "base with the adapters off stops being the initial model, the reference; pass "
                                "--ref-model DIR (the initial model) or --precompute-ref-log-probs")
        if args.ref_model is not None and not os.path.isdir(args.ref_model):
            raise ArgumentError(f"--ref-model {args.ref_model}: no such directory; pass a checkpoint directory of "
                                "this suite (tools/convert_ckpt.py writes one from Hugging Face)")

    def micro_batch_rows(self, micro_batch_size: int) -> int:
        rows = super().micro_batch_rows(micro_batch_size)
        return rows if self.args.precompute_ref_log_probs else 2 * rows  # the reference's rows ride along

    def reference_forwards(self) -> int:
        return 0 if self.args.precompute_ref_log_probs else 1  # the reference scores every trained row

    # ---- the reference -----------------------------------------------------------------------
    def attach(self, trainer) -> None:
        base_reference = uses_base_as_reference(self.args)
        if self.args.ref_model is None and trainer.iteration > 0 and not base_reference:
            raise checkpointing.CheckpointError(
                f"--load {self.args.load} resumes DPO at iteration {trainer.iteration}: the loaded policy is no "
                "longer the initial model that is the default reference; pass --ref-model DIR (the initial model)")
        # with LoRA the reference is the policy itself with its adapters switched off (no second copy)
        references = trainer.models if base_reference else build_reference(trainer, self.args.ref_model)
        if self.args.precompute_ref_log_probs:
            with contextlib.ExitStack() as stack:
                for chunk in references if base_reference else ():
                    stack.enter_context(base_model_of(chunk))
                self.reference_table = self.precompute_reference(trainer, references)
        else:
            self.references = {id(policy): reference for policy, reference in zip(trainer.models, references)}

    def precompute_reference(self, trainer, references: List[nn.Module]) -> Optional[torch.Tensor]:
        """``[pairs, 2]`` summed reference log-probs (chosen, rejected) by pair id, on the last stage: every pair
        the trainer's splits draw from (training, validation, test); the others' rows are NaN, never a silent 0."""
        used = [split.sequence_ids for split in trainer.datasets() if split is not None]
        dataset = self.pairwise_dataset(np.unique(np.concatenate(used)), None, shuffle=False)
        pairs, size = len(dataset), self.args.micro_batch_size
        cp = context_parallel_for(trainer.config, trainer.state)
        device = trainer.acc.device

        def batches() -> Iterator[Batch]:
            for start in range(0, pairs, size):
                batch = {name: value.to(device) for name, value in
                         self.collate([dataset[(start + i) % pairs] for i in range(size)]).items()}
                yield batch if cp is None else split_batch(batch, cp)

        def step(batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
            output = self.run_model(model, batch)
            if not model.post_process:
                return output, {}
            logps, _ = sequence_log_probs(output, batch["loss_mask"], model)  # [2b]
            return logps.sum(), {"logps": torch.stack(chosen_and_rejected(logps), dim=1), "pair": batch["pair"]}

        table, found = torch.full((dataset.num_pairs, 2), float("nan"), device=device), False
        iterator, remaining = batches(), -(-pairs // size)
        for chunk in references:
            chunk.eval()
        while remaining:
            count = min(remaining, PRECOMPUTE_MICROBATCHES)
            for stats in trainer.forward_backward(step, iterator, references, count, forward_only=True,
                                                  pipeline=trainer.pipeline_options()):
                if stats:
                    table[stats["pair"]] = stats["logps"]
                    found = True
            remaining -= count
        return table if found else None  # only the last pipeline stage computes the loss

    def batches(self, dataset, batch_sampler, num_workers: int, device: torch.device) -> Iterator[Batch]:
        for batch in super().batches(dataset, batch_sampler, num_workers, device):
            if self.reference_table is not None:  # 1-D (chosen rows, then rejected): CP splits only [b, s, ...]
                batch["reference_logps"] = self.reference_table[batch["pair"]].t().reshape(-1)  # [2b]
            yield batch

    # ---- the step ----------------------------------------------------------------------------
    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        reference = self.references.get(id(model))
        if reference is None:  # precomputed reference log-probs
            policy_output = self.run_model(model, batch)
            if not model.post_process:
                return policy_output, {}
            if "reference_logps" not in batch:
                raise RuntimeError("DPOTask has no reference: build the trainer with training.setup(), which calls "
                                   "task.attach(trainer)")
            return self.loss(batch, model, policy_output, batch["reference_logps"])  # [2b] chosen first
        rows = batch["tokens"].size(0)
        given = None if model.pre_process else model.input_tensor  # [s, 4b, h]: policy rows, then reference rows
        policy_output = self.run_model(model, batch, None if given is None else given[:, :rows])
        with torch.no_grad(), base_model_of(model) if reference is model else contextlib.nullcontext():
            reference_output = self.run_model(reference, batch, None if given is None else given[:, rows:])
        if not model.post_process:
            return torch.cat([policy_output, reference_output], dim=1), {}  # [s, 4b, h]
        reference_sums, _ = sequence_log_probs(reference_output, batch["loss_mask"], model)
        return self.loss(batch, model, policy_output, reference_sums)

    def loss(self, batch: Batch, model: nn.Module, policy_output: torch.Tensor,
             reference_sums: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """The mean DPO loss of the micro-batch's pairs (plus ``--pref-ftx`` times the chosen replies' SFT loss)."""
        args = self.args
        policy_sums, counts = sequence_log_probs(policy_output, batch["loss_mask"], model)  # [2b] each
        policy_logps, reference_logps = policy_sums, reference_sums
        if args.dpo_loss_type == "ipo":  # IPO compares mean token log-probs
            policy_logps, reference_logps = policy_sums / counts.clamp(min=1), reference_sums / counts.clamp(min=1)
        chosen, rejected = chosen_and_rejected(policy_logps)
        reference_chosen, reference_rejected = chosen_and_rejected(reference_logps)
        losses, chosen_rewards, rejected_rewards = dpo_loss(
            chosen, rejected, reference_chosen, reference_rejected, args.dpo_beta, args.dpo_loss_type,
            args.dpo_label_smoothing)
        loss = losses.mean()
        stats = pair_stats(loss, chosen_rewards, rejected_rewards, chosen, rejected)
        if args.pref_ftx:
            chosen_sums, chosen_counts = chosen_and_rejected(policy_sums)[0], chosen_and_rejected(counts)[0]
            sft = (-chosen_sums / chosen_counts.clamp(min=1)).mean()  # mean token cross-entropy per chosen reply
            loss = loss + args.pref_ftx * sft
            stats.update({"lm loss": loss.detach(), "sft loss": sft.detach()})
        return loss, stats


class SimPOTask(PairwiseTask):
    """SimPO: length-normalised log-probs with a target margin, no reference model."""

    name = "simpo"
    entry = posttrain_entry("simpo")

    def validate(self, args: argparse.Namespace) -> None:
        super().validate(args)
        if args.simpo_beta <= 0:
            raise ArgumentError(f"--simpo-beta {args.simpo_beta} must be positive (e.g. 2.5)")
        _check_smoothing("--simpo-label-smoothing", args.simpo_label_smoothing)
        if args.simpo_label_smoothing and args.simpo_loss_type != "sigmoid":
            raise ArgumentError("--simpo-label-smoothing applies to --simpo-loss-type sigmoid only; drop it")

    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        output = self.run_model(model, batch)
        if not model.post_process:
            return output, {}
        args = self.args
        sums, counts = sequence_log_probs(output, batch["loss_mask"], model)
        chosen, rejected = chosen_and_rejected(sums / counts.clamp(min=1))  # [b] mean token log-probs
        losses, chosen_rewards, rejected_rewards = simpo_loss(chosen, rejected, args.simpo_beta,
                                                              args.gamma_beta_ratio, args.simpo_loss_type,
                                                              args.simpo_label_smoothing)
        loss = losses.mean()
        return loss, pair_stats(loss, chosen_rewards, rejected_rewards, chosen, rejected)


def uses_base_as_reference(args: argparse.Namespace) -> bool:
    """DPO with LoRA and no --ref-model: the reference is the frozen base, i.e. the policy with its adapters off."""
    return bool(args.lora_target_modules) and args.ref_model is None


@contextlib.contextmanager
def base_model_of(model: nn.Module) -> Iterator[None]:
    """Inside, ``model`` is its frozen base: adapters switched off and eval mode (no dropout), as a reference
    copy would be; the training mode is restored on exit."""
    training = model.training
    model.eval()
    try:
        with adapters_disabled(model):
            yield
    finally:
        model.train(training)


def build_reference(trainer, ref_model: Optional[str]) -> List[nn.Module]:
    """Frozen model chunks laid out as the policy's: a copy of its weights now, or ``--ref-model``'s."""
    args, state = trainer.args, trainer.state
    chunks = build_chunks(args, trainer.config, state, trainer.acc.device)
    if ref_model is None:  # the policy's weights now (under FSDP gathered whole on every rank: the copy is not sharded)
        for reference, policy in zip(chunks, trainer.models):
            reference.load_state_dict(full_model_state_dict(policy, state, on_every_rank=True) if uses_fsdp(args)
                                      else policy.state_dict())
    else:
        load_reference(chunks, ref_model, trainer)
    for chunk in chunks:
        chunk.requires_grad_(False)
        chunk.eval()  # no dropout in the reference
    return chunks


def load_reference(chunks: List[nn.Module], directory: str, trainer, flag: str = "--ref-model",
                   same_tokens: str = "DPO compares both models' log-probs of the same tokens: use a reference with "
                                      "the policy's tokenizer") -> None:
    """``flag DIR`` (``--ref-model``; GRPO's ``--reward-model``): this rank's part of a checkpoint of ours loaded
    into the frozen ``chunks`` (checked against their own config); a vocabulary other than the policy's is
    refused with ``same_tokens`` as the reason."""
    vocab = trainer.config.vocab_size

    def same_vocabulary(content: Dict, path: str) -> None:
        saved = content.get("transformer_config") or {}
        if saved.get("vocab_size", vocab) != vocab:
            raise checkpointing.CheckpointError(f"{flag} {directory} has a vocabulary of {saved['vocab_size']} "
                                                f"tokens, the policy {vocab}; {same_tokens}")

    source = WeightSource(directory, flag=flag, misfit="the policy's architecture", hint="",
                          missing=f"{flag} {directory} has no {checkpointing.TRACKER_FILENAME}; pass a checkpoint "
                                  "directory of this suite")
    load_model_weights(chunks, source, trainer.args, trainer.state, check=same_vocabulary)
