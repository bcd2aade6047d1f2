"""Packed documents in pretraining: ``--reset-position-ids`` and ``--eod-mask-loss``.

* The positions restart after every end-of-document token, as Megatron's loop computes them (written
  out here), on a hand example and on random packs.
* ``--eod-mask-loss`` zeroes the loss where the input token is the end of a document.
* Training with both flags (a vocabulary of 8, so that end-of-document tokens are frequent) changes the
  loss, and TP2 with SP and PP2 give the single-process losses and grad norms of two steps (fp32, 1e-5);
  one 2-process launch.
* A position embedding that ignores position ids (ALiBi) is refused in one line.

    python -m pytest -q tests/unit/test_packed_documents.py
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from mindspeed_llm.arguments import ArgumentError, parse_args
from mindspeed_llm.training.pretrain_task import document_position_ids

ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
        "--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "8", "--normalization", "RMSNorm",
        "--swiglu", "--disable-bias-linear", "--micro-batch-size", "2", "--global-batch-size", "4",
        "--train-iters", "2", "--optimizer", "sgd", "--lr", "0.5", "--mock-data", "--tokenizer-type",
        "NullTokenizer", "--seed", "3", "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0",
        "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
        "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3", "--position-embedding-type", "rope"]
PACKED = ["--reset-position-ids", "--eod-mask-loss"]
PARALLEL = {"tp2_sp": ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
            "pp2": ["--pipeline-model-parallel-size", "2"]}


def _megatron_positions(tokens: torch.Tensor, eod: int) -> torch.Tensor:
    """Megatron's get_ltor_masks_and_position_ids loop, written out."""
    positions = torch.arange(tokens.size(1)).repeat(tokens.size(0), 1)
    for b in range(tokens.size(0)):
        previous = 0
        for i in (tokens[b] == eod).nonzero().flatten().tolist():
            positions[b, i + 1:] -= i + 1 - previous
            previous = i + 1
    return positions


def test_positions_restart_after_each_end_of_document() -> None:
    tokens = torch.tensor([[5, 7, 3, 3, 7, 7, 1, 2]])
    assert document_position_ids(tokens, 7).tolist() == [[0, 1, 0, 1, 2, 0, 0, 1]]
    packs = torch.randint(0, 4, (6, 40), generator=torch.Generator().manual_seed(0))
    assert torch.equal(document_position_ids(packs, 3), _megatron_positions(packs, 3))


def test_collate_masks_end_of_document_tokens() -> None:
    from mindspeed_llm.training.pretrain_task import PretrainTask

    task = PretrainTask(parse_args(ARGV + PACKED))
    text = torch.tensor([[1, 7, 2, 7, 3], [7, 1, 2, 3, 4]])
    batch = task.collate([{"text": row} for row in text])
    assert batch["loss_mask"].tolist() == [[1, 0, 1, 0], [0, 1, 1, 1]]
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1], [0, 0, 1, 2]]
    plain = PretrainTask(parse_args(ARGV)).collate([{"text": row} for row in text])
    assert "position_ids" not in plain and plain["loss_mask"].sum() == 8


def _steps(argv: List[str]) -> List[Dict[str, float]]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    steps = []
    for _ in range(2):
        result = trainer.train_step(iterator)
        steps.append({"lm loss": result.loss, "grad_norm": result.grad_norm})
    return steps


def _worker(rank: int, world: int, jobs: Dict[str, List[str]]) -> Dict[str, List[Dict[str, float]]]:
    return {name: _steps(argv) for name, argv in jobs.items()}


def test_packed_training_equals_one_process_under_tp_sp_and_pp() -> None:
    reference = _steps(ARGV + PACKED)
    assert reference[0]["lm loss"] != _steps(ARGV)[0]["lm loss"]  # the flags act
    for per_rank in run_distributed(2, _worker, {name: ARGV + PACKED + extra for name, extra in PARALLEL.items()}):
        for name, steps in per_rank.items():
            for step, (ours, theirs) in enumerate(zip(steps, reference)):
                for key, value in theirs.items():
                    assert abs(ours[key] - value) <= 1e-5 * abs(value), (name, step, key, ours[key], value)


def test_positions_the_model_ignores_are_refused() -> None:
    from mindspeed_llm.arguments import check_pretraining_data

    args = parse_args(ARGV + ["--reset-position-ids", "--position-embedding-type", "alibi"])
    with pytest.raises(ArgumentError, match="--reset-position-ids needs positions the model reads"):
        check_pretraining_data(args)
