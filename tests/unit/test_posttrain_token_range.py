"""Token ids at or above the vocabulary in post-training data.

The pretraining collate names them (tests/unit/test_nan_guard.py); the SFT, pairwise (DPO, SimPO) and reward
model collates use the same check (``pretrain_task.check_token_ids``), so data tokenized with a larger
vocabulary stops at its first batch with one message naming the dataset and the fix, instead of an index error
at TP 1 or an inf loss at TP 2. A bad id in the labels alone is caught too; the ignored label positions
(-100) are not ids.

    python -m pytest tests/unit/test_posttrain_token_range.py -q
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import List

import pytest
import torch

from core.datasets.sft_dataset import PACKED_FILES
from mindspeed_llm.data.handlers import PAIRWISE_FILES
from mindspeed_llm.training.pretrain_task import check_token_ids
from tests.unit.test_posttrain_preference import ARGV as PAIRWISE_ARGV
from tests.unit.test_posttrain_preference import preference_pairs
from tests.unit.test_posttrain_sft import ARGV as SFT_ARGV
from tests.unit.test_posttrain_sft import packed_instruction_sequences, write_indexed

VOCAB = 32  # the runs' --vocab-size
TOO_LARGE = 40


def message(prefix: str) -> str:
    return (rf"token id {TOO_LARGE}, outside the vocabulary of {VOCAB} ids \(--data-path {prefix}\): it was "
            r"tokenized with another tokenizer")


def _first_batch_fails(trainer, prefix: str) -> None:
    dataset = trainer.datasets()[0]
    with pytest.raises(ValueError, match=message(prefix)):
        trainer.task.collate([dataset[i] for i in range(len(dataset))])


@pytest.mark.parametrize("column", ["input_ids", "labels"])
def test_sft_data_outside_the_vocabulary_is_named(tmp_path: Path, column: str) -> None:
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.training import setup

    sequences = packed_instruction_sequences(8)
    ids, labels, docs = sequences[3]
    position = next(i for i, label in enumerate(labels) if label != -100)  # a trained token: in ids and labels
    if column == "input_ids":
        ids = ids[:position] + [TOO_LARGE] + ids[position + 1:]
    else:
        labels = labels[:position] + [TOO_LARGE] + labels[position + 1:]
    sequences[3] = (ids, labels, docs)
    prefix = str(tmp_path / "alpaca")
    write_indexed(prefix, PACKED_FILES, [(i, d, label) for i, label, d in sequences])
    trainer = setup(SFT_ARGV + ["--data-path", prefix], SFTTask)
    _first_batch_fails(trainer, prefix)


@pytest.mark.parametrize("stage", ["dpo", "orm"])
def test_pairwise_data_outside_the_vocabulary_is_named(tmp_path: Path, stage: str) -> None:
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.training import setup

    pairs = preference_pairs(6)
    chosen, chosen_labels, rejected, rejected_labels = pairs[2]
    pairs[2] = (chosen, chosen_labels, rejected[:-1] + [TOO_LARGE], rejected_labels[:-1] + [TOO_LARGE])
    prefix = str(tmp_path / "pairs")
    write_indexed(prefix, PAIRWISE_FILES, pairs)
    trainer = setup(PAIRWISE_ARGV + ["--stage", stage, "--data-path", prefix], STAGES[stage])
    _first_batch_fails(trainer, prefix)


def test_ignored_labels_and_ids_inside_the_vocabulary_pass() -> None:
    args = argparse.Namespace(vocab_size=VOCAB, data_path=["data"])
    rows: List[List[int]] = [[0, 5, VOCAB - 1], [-100, -100, VOCAB - 1]]
    check_token_ids(torch.tensor(rows), args)
    with pytest.raises(ValueError, match=rf"token id {VOCAB}, outside the vocabulary of {VOCAB} ids"):
        check_token_ids(torch.tensor([[-100, VOCAB]]), args)


def test_grpo_prompts_outside_the_vocabulary_are_named(tmp_path: Path) -> None:
    """GRPO's rollout generates from the prompts: an id beyond the vocabulary is named before generation."""
    from core.datasets.sft_dataset import PACKED_FILES as FILES
    from tests.unit.test_grpo_stage import grpo_trainer

    rows = [([1, 2, 3, 4, 5, 6], [1] * 6, [-100, -100, -100, 4, 5, 6]) for _ in range(4)]
    rows[1] = ([1, TOO_LARGE, 3, 4, 5, 6], [1] * 6, [-100, -100, -100, 4, 5, 6])
    prefix = str(tmp_path / "prompts")
    write_indexed(prefix, FILES, rows)
    trainer = grpo_trainer(prefix, "--num-generations", "2", "--global-batch-size", "4")
    with pytest.raises(ValueError, match=message(prefix)):
        trainer.train_step(trainer.train_iterator())
