"""FSDP through the training loop: ``--use-torch-fsdp2``, ``--use-torch-fsdp`` and HSDP.

The trainer's losses at DP=2 (FSDP2, FSDP1, FSDP2 with TP=2 and sequence
parallelism) and DP=4 (HSDP 2 x 2) equal the single-process run's, and an
FSDP2 checkpoint (Megatron layout, the unsharded ``model`` entry) resumes
with the losses of an uninterrupted run and loads into a run without FSDP.
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from tests.distributed.test_training_equivalence import BASE

FIVE = BASE[:]
FIVE[FIVE.index("--train-iters") + 1] = "5"


def _losses(argv: List[str], steps: int) -> List[float]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(steps)]


def _save_after(argv: List[str], steps: int, save: str) -> None:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + ["--save", save])
    iterator = trainer.train_iterator()
    for _ in range(steps):
        trainer.train_step(iterator)
    trainer.save()


def worker(rank: int, world_size: int, tmp: str) -> Dict[str, object]:
    results: Dict[str, object] = {}
    if world_size == 1:
        results["reference"] = _losses(FIVE, 5)
    elif world_size == 2:
        for name, flags in {"fsdp2": ["--use-torch-fsdp2"], "fsdp1": ["--use-torch-fsdp"],
                            "fsdp2_tp2_sp": ["--use-torch-fsdp2", "--tensor-model-parallel-size", "2",
                                             "--sequence-parallel"]}.items():
            results[name] = _losses(FIVE + flags, 3)
        save = os.path.join(tmp, "fsdp2_ckpt")
        _save_after(FIVE + ["--use-torch-fsdp2"], 2, save)
        results["resumed"] = _losses(FIVE + ["--use-torch-fsdp2", "--load", save], 3)
        results["resumed_without_fsdp"] = _losses(FIVE + ["--load", save], 3)
    else:
        results["hsdp"] = _losses(FIVE + ["--use-torch-fsdp2", "--hsdp-replicate-size", "2"], 3)
    return results if rank == 0 else None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, object]:
    tmp = str(tmp_path_factory.mktemp("fsdp_training"))
    merged: Dict[str, object] = {}
    for world in (1, 2, 4):
        merged.update(run_distributed(world, worker, tmp)[0])
    return merged


def _close(actual: List[float], expected: List[float]) -> None:
    torch.testing.assert_close(torch.tensor(actual), torch.tensor(expected), rtol=1e-5, atol=0)


@pytest.mark.parametrize("name", ["fsdp2", "fsdp1", "fsdp2_tp2_sp", "hsdp"])
def test_fsdp_training_equals_single_process(runs, name):
    _close(runs[name], runs["reference"][:3])


def test_fsdp2_checkpoint_resumes_the_run(runs):
    _close(runs["resumed"], runs["reference"][2:])


def test_fsdp2_checkpoint_loads_without_fsdp(runs):
    _close(runs["resumed_without_fsdp"], runs["reference"][2:])
