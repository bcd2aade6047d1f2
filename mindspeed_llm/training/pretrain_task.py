"""The pretraining task behind ``pretrain_gpt.py``: next-token prediction on packed token windows.

Data: ``--mock-data`` (random tokens) or indexed ``.bin/.idx`` data
(``--data-path`` with ``--split``, or per-split blends), each sample
``seq_length + 1`` tokens. The loss is the mean per-token cross-entropy (with
``--label-smoothing-factor``), logged as ``lm loss``. Packed samples may restart their positions after
each end-of-document token (``--reset-position-ids``), drop the loss on those tokens
(``--eod-mask-loss``) and keep attention within each document (``--reset-attention-mask``: the batch's
``document_ids``), as Megatron does.

With MoE layers (``--num-experts``) the routers' losses act through the MoE layers themselves
(core/transformer/moe/aux_losses.py) and the trainer logs them.

With multi-token prediction (``--mtp-num-layers D``) the MTP loss, ``--mtp-loss-scaling-factor / D``
times the sum of the D modules' masked mean cross-entropies (each over the loss mask shifted by its
depth), is added to the loss, and each module's mean is logged apart as ``mtp_1 loss`` ... ``mtp_D loss``
(Megatron's names; unscaled).
"""
from __future__ import annotations

import argparse
from typing import Dict, List, Tuple

import torch
from torch import nn

from core import checkpointing
from core.datasets.gpt_dataset import (build_pretraining_datasets, corpus_max_token_ids, parse_blend, parse_split,
                                       split_ranges)
from core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetError
from core.datasets.mock_dataset import MockGPTDataset
from core.transformer.attention_mask import document_ids
from mindspeed_llm.arguments import (ArgumentError, check_pretraining_data, check_pretraining_files,
                                     evaluation_requested)
from mindspeed_llm.tokenizer import build_tokenizer
from core.transformer.multi_token_prediction import collect_mtp_losses, mtp_loss, mtp_loss_names
from mindspeed_llm.training.task import Batch, Splits, TrainingTask, token_mean

VALIDATION_SEED_OFFSET = 1


class TrainingDataError(ValueError):
    """Bad training data found in a batch; the message names the data and the fix."""

    @classmethod
    def unwrapped(cls, error: "TrainingDataError") -> "TrainingDataError":
        """The error without the DataLoader's wrapping (a worker's error comes back with its traceback)."""
        last = str(error).strip().splitlines()[-1] if str(error).strip() else ""
        return cls(last.split(f"{cls.__name__}: ", 1)[-1])


def check_token_ids(tokens: torch.Tensor, args: argparse.Namespace) -> None:
    """Stop at a batch holding a token id outside the vocabulary (``>= --vocab-size``), naming the dataset and
    the fix: otherwise an index error at TP 1 and an inf loss at TP > 1. ``tokens``: ids of any shape (labels
    too; their ignored positions are negative)."""
    largest = int(tokens.max()) if tokens.numel() else -1
    if largest >= args.vocab_size:
        raise _outside_vocabulary(largest, args.vocab_size, f"--data-path {' '.join(args.data_path or [])}")


def check_corpus_token_ids(datasets: Splits, args: argparse.Namespace) -> None:
    """Before the first step: the largest token id of every corpus behind ``datasets`` (each ``.bin`` scanned once
    when the datasets open, then cached) is inside the vocabulary; else a TrainingDataError naming the prefix."""
    for prefix, largest in corpus_max_token_ids(datasets).items():
        if largest >= args.vocab_size:
            raise _outside_vocabulary(largest, args.vocab_size, f"{_data_flag(args, prefix)} {prefix}")


def _outside_vocabulary(largest: int, vocab_size: int, data: str) -> TrainingDataError:
    """The one-line error for token id ``largest`` of the data ``data`` (a flag and its value) beyond the vocabulary."""
    return TrainingDataError(f"the training data holds token id {largest}, outside the vocabulary of {vocab_size} ids "
                             f"({data}): it was tokenized with another tokenizer; preprocess it again with this run's "
                             "tokenizer, or give the tokenizer it was made with")


def _data_flag(args: argparse.Namespace, prefix: str) -> str:
    """The data flag whose blend names ``prefix`` (``--data-path`` when none does)."""
    for flag in ("--data-path", "--train-data-path", "--valid-data-path", "--test-data-path"):
        blend = parse_blend(getattr(args, flag[2:].replace("-", "_"), None), flag)
        if blend is not None and prefix in blend[0]:
            return flag
    return "--data-path"


class PretrainTask(TrainingTask):
    name = "pretrain"
    stat_names = ("lm loss",)

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.stat_names = ("lm loss",) + _mtp_stat_names(args)
        needs_eod = any(getattr(args, flag, False) for flag in ("eod_mask_loss", "reset_position_ids",
                                                                 "reset_attention_mask"))
        self.eod = build_tokenizer(args).eod if needs_eod else None  # the end-of-document token id

    def validate(self, args: argparse.Namespace) -> None:
        check_pretraining_data(args)
        check_pretraining_files(args)  # the .bin/.idx pairs exist and agree (cheap), before any process group
        check_validation_data(args)

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        """Synthetic with --mock-data, else indexed data (index caches and each corpus's largest token id found by
        rank 0 first), every corpus's largest id checked against the vocabulary."""
        train, valid, test = num_samples
        if args.mock_data:
            return (MockGPTDataset(train, args.seq_length, args.vocab_size, args.seed),
                    MockGPTDataset(max(valid, 1), args.seq_length, args.vocab_size,
                                   args.seed + VALIDATION_SEED_OFFSET), None)
        datasets = build_pretraining_datasets(
            args.data_path, args.split, args.train_data_path, args.valid_data_path, args.test_data_path,
            args.seq_length, args.seed, num_samples, cache_path=args.data_cache_path,
            is_rank0_first_barrier=checkpointing.barrier, scan_max_token_id=True)
        check_corpus_token_ids(datasets, args)  # a bad id anywhere stops the run now, not at its batch
        return datasets

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Batch:
        text = torch.stack([s["text"] for s in samples])  # [b, s + 1]
        check_token_ids(text, self.args)
        tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
        batch = {"tokens": tokens, "labels": labels, "loss_mask": torch.ones_like(labels, dtype=torch.float32)}
        if self.args.eod_mask_loss:  # Megatron: no loss where the input token is the end of a document
            batch["loss_mask"][tokens == self.eod] = 0.0
        if self.args.reset_position_ids:
            batch["position_ids"] = document_position_ids(tokens, self.eod)
        if self.args.reset_attention_mask:  # attention stays within each document
            batch["document_ids"] = document_ids(tokens, self.eod)
        return batch

    def forward_step(self, batch: Batch, model: nn.Module) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Mean per-token loss of the micro-batch; a stage without the output layer returns activations."""
        per_token = model(batch["tokens"], labels=batch["labels"], position_ids=batch.get("position_ids"),
                          label_smoothing=self.args.label_smoothing_factor,
                          document_ids=batch.get("document_ids"))  # [b, s] fp32
        if not model.post_process:
            return per_token, {}  # [s, b, h] activations for the next stage
        mask = batch["loss_mask"]
        loss = token_mean(per_token, mask, model)
        stats = {"lm loss": loss.detach()}
        mtp_losses = collect_mtp_losses(model)
        if mtp_losses:
            added, means = mtp_loss(mtp_losses, mask, self.args.mtp_loss_scaling_factor,
                                    cp=getattr(model, "context_parallel", None),
                                    mean=lambda values, shifted: token_mean(values, shifted, model))
            loss = loss + added
            stats.update((name, mean.detach()) for name, mean in zip(mtp_loss_names(len(means)), means))
        return loss, stats


def check_validation_data(args: argparse.Namespace) -> None:
    """``--eval-iters``/``--eval-interval`` given while --split leaves no validation documents: one line (Megatron
    would skip validation silently). Unreadable files are left to the dataset builder's own errors."""
    blend = parse_blend(args.data_path)
    if not evaluation_requested(args) or args.mock_data or blend is None:
        return  # --mock-data validates on its own tokens; --valid-data-path / none: the builder decides
    try:
        fractions = parse_split(args.split or "969, 30, 1")
        counts = [len(IndexedDataset(prefix)) for prefix in blend[0]]
    except (ValueError, OSError, IndexedDatasetError):
        return
    if all(end <= begin for begin, end in (split_ranges(fractions, count)[1] for count in counts)):
        raise ArgumentError(f"--eval-iters {args.eval_iters} --eval-interval {args.eval_interval}: --split "
                            f"{args.split} gives 0 of the {sum(counts)} documents of --data-path to validation; "
                            "pass a validation share (e.g. --split 98,2,0) or --valid-data-path, or --eval-iters 0 "
                            "to train without validation")


def document_position_ids(tokens: torch.Tensor, eod: int) -> torch.Tensor:
    """``tokens`` [b, s] -> positions [b, s] that restart at 0 after every ``eod`` (Megatron's
    ``--reset-position-ids``: the token after an end of document is position 0)."""
    index = torch.arange(tokens.size(1), device=tokens.device).expand_as(tokens)  # [b, s]
    after_eod = torch.where(tokens == eod, index + 1, torch.zeros_like(index))  # where the next document starts
    starts = torch.cummax(torch.cat([torch.zeros_like(index[:, :1]), after_eod[:, :-1]], dim=1), dim=1).values
    return index - starts


def _mtp_stat_names(args: argparse.Namespace) -> Tuple[str, ...]:
    """``mtp_1 loss`` ... ``mtp_D loss`` with ``--mtp-num-layers D``, else none."""
    depth = getattr(args, "mtp_num_layers", None)
    return mtp_loss_names(depth) if depth else ()
