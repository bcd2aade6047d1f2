"""Validation and test splits of the post-training stages (every stage is a full task).

* ``--split a,b,c`` cuts an instruction dataset's sequences and a pairwise dataset's pairs into contiguous,
  disjoint train / validation / test ranges covering the data (Megatron's rounding); each split's dataset
  draws only from its range; without ``--split`` everything trains (the order is unchanged).
* SFT with ``--split 80,20,0 --eval-iters 1 --eval-interval 1`` prints a validation line whose ``lm loss``
  equals the mean assistant-token cross-entropy of the validation sequences, computed here from the raw
  files and the trained model's logits.
* DPO's validation line carries every statistic, equal to the DPO loss, rewards and log-probs computed
  here from the raw pairs with the trained policy and the frozen reference; validation with
  ``--precompute-ref-log-probs`` (whose table covers the validation pairs) equals the frozen copy, also
  with LoRA (the reference is the base with its adapters off). The reward model (with its accuracy) and
  SimPO print the statistics of the validation micro-batches.
* ``--eval-iters``/``--eval-interval`` given while the split leaves validation empty: one line naming
  --split (pretraining too); Megatron's default eval flags without --split still train on everything.

    python -m pytest -q tests/unit/test_posttrain_validation.py
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.datasets.pairwise_dataset import PairwiseDataset
from core.datasets.sft_dataset import SFTPackedDataset
from mindspeed_llm.arguments import parse_args
from mindspeed_llm.posttrain.splits import split_sequence_ids
from tests.unit.test_posttrain_preference import ARGV as PAIR_ARGV
from tests.unit.test_posttrain_preference import _reply_log_probs, pairwise_dataset
from tests.unit.test_posttrain_sft import ARGV as SFT_ARGV
from tests.unit.test_posttrain_sft import _error, instruction_dataset

EVAL = ["--split", "80,20,0", "--eval-iters", "1", "--eval-interval", "1"]
LORA = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "4",
        "--lora-alpha", "8"]


def _setup(argv: List[str], stage: str):
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.training import setup

    return setup(argv, STAGES[stage])


def _printed_validation(out: str) -> Dict[str, float]:
    """The statistics of the last validation block Megatron's format printed."""
    line = [line for line in out.splitlines() if "validation loss at iteration" in line][-1]
    values = dict(re.findall(r"([\w/ ]+?) value: ([-+0-9.E]+) \|", line))
    return {name.strip(): float(value) for name, value in values.items()}


# ------------------------------------------------------------------------------------------------ ranges

@pytest.mark.parametrize("split", ["80,20,0", "969,30,1", "1,1,1", "100,0,0", "0,50,50", "98/2/0"])
def test_split_ranges_are_contiguous_disjoint_and_cover_the_data(split: str) -> None:
    for count in (1, 3, 7, 16, 24, 101):
        args = parse_args(["--split", split])
        ids = split_sequence_ids(args, count)
        assert np.array_equal(np.concatenate(ids), np.arange(count)), (split, count)
        for part in ids:  # contiguous
            assert np.array_equal(part, np.arange(part[0], part[0] + len(part)) if len(part) else part)
    default = split_sequence_ids(parse_args([]), 24)  # no --split: everything trains
    assert np.array_equal(default[0], np.arange(24)) and not len(default[1]) and not len(default[2])
    expected = split_sequence_ids(parse_args(["--split", "80,20,0"]), 24)
    assert [len(part) for part in expected] == [19, 5, 0]  # round(19.2), round(4.8): Megatron's rounding


def test_each_split_draws_only_from_its_sequences(tmp_path: Path) -> None:
    instruction, _ = instruction_dataset(tmp_path, count=10)
    pairs, _ = pairwise_dataset(tmp_path, count=10)
    ids = np.arange(6, 9)
    for full_shuffle in (False, True):
        dataset = SFTPackedDataset(instruction, 16, 7, seed=5, full_shuffle=full_shuffle, sequence_ids=ids)
        assert set(dataset.order.tolist()) == set(ids.tolist()) and len(dataset) == 7
        assert sorted(dataset.order[:6].tolist()) == [6, 6, 7, 7, 8, 8] or full_shuffle  # whole epochs
        whole = SFTPackedDataset(instruction, 16, 25, seed=5, full_shuffle=full_shuffle)
        explicit = SFTPackedDataset(instruction, 16, 25, seed=5, full_shuffle=full_shuffle, sequence_ids=np.arange(10))
        assert np.array_equal(whole.order, explicit.order)  # the default order is unchanged
    paired = PairwiseDataset(pairs, 16, 6, seed=5, sequence_ids=ids)
    assert sorted(paired.order.tolist()) == [6, 6, 7, 7, 8, 8]  # whole epochs over its pairs
    assert [int(paired[i]["pair"]) for i in range(6)] == paired.order.tolist()
    assert np.array_equal(PairwiseDataset(pairs, 16, 25, seed=5).order,
                          PairwiseDataset(pairs, 16, 25, seed=5, sequence_ids=np.arange(10)).order)
    with pytest.raises(Exception, match=r"must lie in \[0, 10\)"):
        SFTPackedDataset(instruction, 16, sequence_ids=[3, 10])


def test_the_tasks_build_the_three_splits(tmp_path: Path) -> None:
    instruction, _ = instruction_dataset(tmp_path)  # 24 sequences
    trainer = _setup(SFT_ARGV + ["--data-path", instruction, *EVAL], "sft")
    train, valid, test = trainer.datasets()
    assert np.array_equal(train.sequence_ids, np.arange(19)) and np.array_equal(valid.sequence_ids, np.arange(19, 24))
    assert test is None and len(train) == 2 * 4 and len(valid) == (2 // 1 + 1) * 1 * 4  # the trainer's counts
    assert set(train.order.tolist()) <= set(range(19)) and set(valid.order.tolist()) <= set(range(19, 24))
    default = _setup(SFT_ARGV + ["--data-path", instruction], "sft").datasets()
    assert np.array_equal(default[0].sequence_ids, np.arange(24)) and default[1] is None and default[2] is None
    pairs, _ = pairwise_dataset(tmp_path)  # 16 pairs
    train, valid, test = _setup(PAIR_ARGV + ["--stage", "dpo", "--data-path", pairs, "--split", "50,25,25",
                                             "--eval-iters", "1"], "dpo").datasets()
    assert [d.sequence_ids.tolist() for d in (train, valid, test)] == [list(range(8)), list(range(8, 12)),
                                                                      list(range(12, 16))]


# -------------------------------------------------------------------------------------------- validation

def test_sft_validation_is_the_loss_of_the_validation_sequences(tmp_path: Path, capsys) -> None:
    from mindspeed_llm.training.training import train

    prefix, sequences = instruction_dataset(tmp_path)
    trainer = train(_setup(SFT_ARGV + ["--data-path", prefix, *EVAL, "--train-iters", "1"], "sft"))
    printed = _printed_validation(capsys.readouterr().out)
    valid = trainer.datasets()[1]
    assert set(valid.order.tolist()) <= set(range(19, 24))
    means = []
    with torch.no_grad():
        for first in (0, 2):  # the eval global batch: two micro-batches of two samples
            samples = [valid[first], valid[first + 1]]
            batch = trainer.task.collate(samples)
            logits = trainer.model(batch["tokens"], document_ids=batch["document_ids"],
                                   position_ids=batch["position_ids"])  # [2, s, v]
            terms = []
            for row, sequence in enumerate(int(valid.order[first + k]) for k in range(2)):
                ids, labels, docs = sequences[sequence]
                for i in range(len(ids) - 1):
                    if labels[i + 1] != -100 and docs[i + 1] == docs[i]:  # an assistant token of the same sample
                        terms.append(F.cross_entropy(logits[row, i].double(), torch.tensor(ids[i + 1])))
            means.append(torch.stack(terms).mean())
    expected = float(torch.stack(means).mean())
    assert abs(trainer.evaluate()["lm loss"] - expected) < 1e-6
    assert abs(printed["lm loss"] - expected) <= 1e-6 * abs(expected)  # 7 significant digits in the line
    assert trainer.losses[0] != pytest.approx(expected, abs=1e-3)  # a different set (and model) than training's


def test_dpo_validation_reports_every_statistic_of_the_validation_pairs(tmp_path: Path, capsys) -> None:
    from mindspeed_llm.training.training import train

    prefix, pairs = pairwise_dataset(tmp_path)  # 16 pairs: 13 train, 3 validate
    trainer = train(_setup(PAIR_ARGV + ["--stage", "dpo", "--data-path", prefix, *EVAL, "--train-iters", "1",
                                        "--optimizer", "adam", "--lr", "0.01"], "dpo"))
    printed = _printed_validation(capsys.readouterr().out)
    valid = trainer.datasets()[1]
    order = [int(pair) for pair in valid.order[:4]]  # 3 pairs, the 4th sample starts their 2nd epoch
    assert set(order) == {13, 14, 15}
    beta, reference = trainer.args.dpo_beta, trainer.task.references[id(trainer.model)]
    logps = {"policy": [], "reference": []}
    with torch.no_grad():
        for name, model in (("policy", trainer.model), ("reference", reference)):
            model.eval()
            for pair in order:
                chosen_ids, chosen_labels, rejected_ids, rejected_labels = pairs[pair]
                rows = torch.stack([valid.side("chosen", pair)["chosen_tokens"],
                                    valid.side("rejected", pair)["rejected_tokens"]])  # [2, s]
                logits = model(rows)  # [2, s, v]: the chosen reply, the rejected one
                logps[name].append((_reply_log_probs(logits[0], chosen_ids, chosen_labels),
                                    _reply_log_probs(logits[1], rejected_ids, rejected_labels)))
    policy, ref = np.array(logps["policy"]), np.array(logps["reference"])  # [4, 2] (chosen, rejected)
    rewards = beta * (policy - ref)  # [4, 2]
    margins = rewards[:, 0] - rewards[:, 1]
    expected = {"lm loss": float(np.mean([-math.log(1 / (1 + math.exp(-m))) for m in margins])),
                "rewards/chosen": rewards[:, 0].mean(), "rewards/rejected": rewards[:, 1].mean(),
                "rewards/accuracies": float((margins > 0).mean()), "rewards/margins": margins.mean(),
                "logps/chosen": policy[:, 0].mean(), "logps/rejected": policy[:, 1].mean()}
    assert abs(expected["rewards/margins"]) > 1e-3  # the policy moved: the check is not ln 2 by construction
    evaluated = trainer.evaluate()
    assert set(evaluated) == set(expected) == set(printed)
    for name, value in expected.items():
        assert abs(evaluated[name] - value) <= 1e-5 * max(1.0, abs(value)), (name, evaluated[name], value)
        assert abs(printed[name] - value) <= 2e-6 * max(1.0, abs(value)), (name, printed[name], value)


@pytest.mark.parametrize("lora", [False, True], ids=["frozen-copy", "lora-adapters-off"])
def test_dpo_validation_with_precomputed_reference_equals_the_live_reference(tmp_path: Path, lora: bool) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    argv = PAIR_ARGV + ["--stage", "dpo", "--data-path", prefix, *EVAL, "--optimizer", "adam", "--lr", "0.01",
                        *(LORA if lora else [])]
    results = []
    for extra in ([], ["--precompute-ref-log-probs"]):
        trainer = _setup(argv + extra, "dpo")
        if extra:  # the table holds the training and the validation pairs
            assert torch.isfinite(trainer.task.reference_table).all()
        iterator = trainer.train_iterator()
        trainer.train_step(iterator)
        results.append(trainer.evaluate())
    live, precomputed = results
    assert abs(live["rewards/margins"]) > 1e-4
    for name, value in live.items():
        assert math.isfinite(precomputed[name])
        assert abs(precomputed[name] - value) <= 1e-5 * max(1.0, abs(value)), (name, precomputed[name], value)


def test_the_precomputed_table_has_no_rows_for_pairs_no_split_uses(tmp_path: Path) -> None:
    prefix, _ = pairwise_dataset(tmp_path)
    argv = PAIR_ARGV + ["--stage", "dpo", "--data-path", prefix, "--split", "50,25,25", "--precompute-ref-log-probs"]
    table = _setup(argv, "dpo").task.reference_table  # [16, 2]; --eval-iters 0: no validation or test dataset
    assert torch.isfinite(table[:8]).all() and torch.isnan(table[8:]).all()
    table = _setup(argv + ["--eval-iters", "1"], "dpo").task.reference_table  # every split is built
    assert torch.isfinite(table).all()


@pytest.mark.parametrize("stage", ["orm", "simpo"])
def test_reward_model_and_simpo_validation_report_their_statistics(tmp_path: Path, capsys, stage: str) -> None:
    from mindspeed_llm.training.training import train

    prefix, _ = pairwise_dataset(tmp_path)
    trainer = train(_setup(PAIR_ARGV + ["--stage", stage, "--data-path", prefix, *EVAL, "--train-iters", "1"],
                           stage))
    printed = _printed_validation(capsys.readouterr().out)
    assert set(printed) == set(trainer.task.stat_names) and ("accuracy" in printed) == (stage == "orm")
    stats = []
    with torch.no_grad():
        trainer.model.eval()
        batches = trainer.batches(trainer.datasets()[1])
        stats = [trainer.task.forward_step(next(batches), trainer.model)[1] for _ in range(2)]
    for name in trainer.task.stat_names:
        expected = float(np.mean([float(s[name]) for s in stats]))
        assert abs(printed[name] - expected) <= 2e-6 * max(1.0, abs(expected)), name


# ------------------------------------------------------------------------------------------------ refusals

def test_evaluation_without_a_validation_split_is_one_line(tmp_path: Path, capsys) -> None:
    instruction, _ = instruction_dataset(tmp_path)
    pairs, _ = pairwise_dataset(tmp_path)
    evaluation = ["--eval-iters", "1", "--eval-interval", "1"]
    line = _error(SFT_ARGV + ["--data-path", instruction, *evaluation], capsys)
    assert "--stage sft has no validation split (--split 100,0,0 (the default) gives 0 of the 24 sequences" in line
    assert "pass e.g. --split 90,10,0" in line
    line = _error(PAIR_ARGV + ["--stage", "dpo", "--data-path", pairs, "--split", "99,1,0", *evaluation], capsys)
    assert "--stage dpo has no validation split (--split 99,1,0 gives 0 of the 16 pairs to validation)" in line
    line = _error(PAIR_ARGV + ["--stage", "orm", "--data-path", pairs, "--split", "0,1,0"], capsys)
    assert "gives none of the 16 pairs of --data-path to training" in line
    # Megatron's default --eval-iters/--eval-interval, not given: a run without --split trains on everything
    from mindspeed_llm.posttrain import SFTTask

    at = SFT_ARGV.index("--eval-iters")
    argv = SFT_ARGV[:at] + SFT_ARGV[at + 2:] + ["--data-path", instruction]
    args = parse_args(argv)
    assert args.eval_iters > 0 and args.eval_interval
    SFTTask(args).validate(args)


def test_pretraining_refuses_evaluation_without_validation_documents_too(tmp_path: Path, capsys) -> None:
    from core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix = str(tmp_path / "text_text_document")
    builder = IndexedDatasetBuilder(prefix + ".bin", np.int32)
    for length in range(20, 60):
        builder.add_item(np.arange(length) % 31 + 1)
        builder.end_document()
    builder.finalize(prefix + ".idx")
    pretraining = [arg for arg in SFT_ARGV if arg not in ("--stage", "sft", "--is-instruction-dataset")]
    at = pretraining.index("--eval-iters")
    pretraining = pretraining[:at] + pretraining[at + 2:] + ["--data-path", prefix, "--num-workers", "0",
                                                             "--data-cache-path", str(tmp_path / "cache")]
    line = _error(pretraining + ["--split", "100,0,0", "--eval-iters", "5"], capsys, "pretrain")
    assert "--split 100,0,0 gives 0 of the 40 documents of --data-path to validation" in line
    assert "gives 0 of the 40" in _error(pretraining + ["--split", "99,1,0", "--eval-interval", "1"], capsys,
                                         "pretrain")  # 1% of 40 rounds to none
    from mindspeed_llm.training.pretrain_task import PretrainTask

    for accepted in (["--split", "100,0,0"], ["--split", "100,0,0", "--eval-iters", "0"], ["--split", "90,10,0",
                                                                                        "--eval-iters", "5"]):
        args = parse_args(pretraining + accepted)  # Megatron's defaults, no evaluation, or validation documents
        PretrainTask(args).validate(args)
