"""Train / validation / test splits of a post-training dataset: ranges of its sequences (or preference pairs).

``--split a,b,c`` has Megatron's meaning (``core.datasets.gpt_dataset.parse_split``): the stored sequences of
``--data-path`` (instruction sequences for SFT, pairs for DPO/SimPO/ORM) are cut into three contiguous ranges
with the rounding Megatron uses for a pretraining corpus's documents (``split_ranges``: the last bound is
exact). Each split's dataset draws only from its range (shuffled, in epochs, as the whole data was before),
``num_samples`` from the trainer as for pretraining; a split with no sequences or no samples is None.

Without an explicit ``--split`` (command line or YAML) a post-training stage trains on every sequence
(``100,0,0``): Megatron's ``969,30,1`` default would silently move 3% of a fine-tuning set out of training.

Evaluation asked for (``--eval-iters N > 0`` given with ``--eval-interval K``, either explicitly) while the
split leaves validation empty is refused in one line before any process group: otherwise the trainer would
skip validation silently (Megatron's behaviour) and the flags would do nothing; pretraining refuses the same
(``pretrain_task.check_validation_data``).
"""
from __future__ import annotations

import argparse
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from torch.utils.data import Dataset

from core.datasets.gpt_dataset import parse_split, split_ranges
from core.datasets.indexed_dataset import IndexedDataset
from core.datasets.sft_dataset import packed_prefix
from mindspeed_llm.arguments import ArgumentError, evaluation_requested
from mindspeed_llm.training.task import Splits

TRAIN_ON_EVERYTHING = (1.0, 0.0, 0.0)
SPLIT_NAMES = ("training", "validation", "test")


def split_fractions(args: argparse.Namespace) -> List[float]:
    """The explicit ``--split`` as three fractions, else everything to training."""
    if "split" not in getattr(args, "explicit_args", {}):
        return list(TRAIN_ON_EVERYTHING)
    try:
        return parse_split(args.split)
    except ValueError as error:
        raise ArgumentError(str(error)) from None


def split_sequence_ids(args: argparse.Namespace, count: int) -> List[np.ndarray]:
    """The sequence ids of each split (train, valid, test): contiguous, disjoint, covering ``[0, count)``."""
    return [np.arange(begin, end, dtype=np.int64) for begin, end in split_ranges(split_fractions(args), count)]


def stored_sequences(prefix: str, name: str) -> int:
    """How many sequences (items) the packed file ``{prefix}_packed_{name}_document`` holds."""
    return len(IndexedDataset(packed_prefix(prefix, name)))


def check_splits(args: argparse.Namespace, count: int, unit: str) -> None:
    """Training gets sequences; requested evaluation gets a validation split. One-line errors naming --split."""
    train, valid, _ = split_sequence_ids(args, count)
    split = args.split if "split" in getattr(args, "explicit_args", {}) else "100,0,0 (the default)"
    if len(train) == 0:
        raise ArgumentError(f"--split {split} gives none of the {count} {unit} of --data-path to training; "
                            "give the first part a share, e.g. --split 90,10,0")
    if evaluation_requested(args) and len(valid) == 0:
        raise ArgumentError(f"--eval-iters {args.eval_iters} --eval-interval {args.eval_interval}: --stage "
                            f"{args.stage} has no validation split (--split {split} gives 0 of the {count} {unit} "
                            "to validation); pass e.g. --split 90,10,0, or --eval-iters 0 to train without validation")


def build_split_datasets(make: Callable[[np.ndarray, int], Dataset], sequence_ids: Sequence[np.ndarray],
                         num_samples: Tuple[int, int, int]) -> Splits:
    """``make(ids, samples)`` for each split that has sequences and samples, else None."""
    datasets: List[Optional[Dataset]] = [make(ids, int(samples)) if len(ids) and samples > 0 else None
                                         for ids, samples in zip(sequence_ids, num_samples)]
    return datasets[0], datasets[1], datasets[2]
