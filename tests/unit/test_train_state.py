"""The run's state (``mindspeed_llm/training/train_state.py``): one save and one load for both checkpoint formats.

``TrainState.save`` / ``TrainState.load`` round-trip the counters, the schedule and the RNG states on their
own; then a trainer saves in the classic per-rank format and in torch_dist, and a fresh trainer loading either
has the same iteration, consumed samples (the data position), skipped iterations, schedule, loss scale and RNG
states as the one that saved, while ``--finetune`` takes none of them.

    python -m pytest -q tests/unit/test_train_state.py
"""
from __future__ import annotations

import argparse
from typing import Dict

import pytest
import torch

from core.tensor_parallel.random import get_all_rng_states, set_all_rng_states
from mindspeed_llm.training.lr_scheduler import OptimizerParamScheduler
from mindspeed_llm.training.train_state import TrainState, rank_rng_states
from mindspeed_llm.training.training import Trainer, setup

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "8", "--lr", "1e-3",
    "--lr-warmup-iters", "2", "--lr-decay-style", "cosine", "--min-lr", "1e-4", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0.1",
    "--fp16", "--initial-loss-scale", "1024", "--loss-scale-window", "2",
]
LOAD_FLAGS = argparse.Namespace(override_opt_param_scheduler=False, use_checkpoint_opt_param_scheduler=False,
                                no_load_rng=False)


def _scheduler() -> OptimizerParamScheduler:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=1.0, min_lr=0.1, lr_warmup_steps=2,
                                   lr_decay_steps=10, lr_decay_style="cosine", start_wd=0.0, end_wd=0.0,
                                   wd_incr_steps=10, wd_incr_style="constant")


def test_the_entries_round_trip() -> None:
    saved_state = TrainState(_scheduler(), iteration=7, consumed_samples=28, skipped_iterations=2)
    saved_state.scheduler.step(5)
    rng = get_all_rng_states()
    expected_draw = torch.rand(4)
    entries = saved_state.save({"rng_state": [rng]})
    assert list(entries) == ["opt_param_scheduler", "rng_state", "consumed_train_samples", "skipped_iterations"]
    torch.rand(3)  # the streams move on
    loaded = TrainState(_scheduler())
    loaded.load(entries, 7, "file", LOAD_FLAGS, schedule=True, rng_states=rank_rng_states(entries, 0, LOAD_FLAGS))
    assert (loaded.iteration, loaded.consumed_samples, loaded.skipped_iterations) == (7, 28, 2)
    assert loaded.scheduler.num_steps == 5 and loaded.scheduler.get_lr() == saved_state.scheduler.get_lr() != 0.0
    assert torch.equal(torch.rand(4), expected_draw)
    fresh = TrainState(_scheduler())
    fresh.load(entries, 7, "file", LOAD_FLAGS, schedule=False, rng_states=None)  # --no-load-optim: no schedule
    assert fresh.iteration == 7 and fresh.scheduler.num_steps == 0
    no_rng = argparse.Namespace(**{**vars(LOAD_FLAGS), "no_load_rng": True})
    assert rank_rng_states(entries, 0, no_rng) is None
    assert rank_rng_states(entries, 3, LOAD_FLAGS) is rng  # a DP rank the save did not have takes the first's


def _progress(trainer: Trainer) -> Dict[str, object]:
    """What a resume must give back, the weights aside."""
    return {"iteration": trainer.iteration, "consumed": trainer.consumed_samples,
            "skipped": trainer.skipped_iterations, "steps": trainer.scheduler.num_steps,
            "lr": trainer.scheduler.get_lr(), "loss_scale": trainer.optimizer.loss_scale}


@pytest.mark.parametrize("ckpt_format", ["torch", "torch_dist"])
def test_both_formats_resume_the_same_state(tmp_path, ckpt_format: str) -> None:
    save = str(tmp_path / "ckpt")
    trainer = setup(ARGV + ["--save", save, "--ckpt-format", ckpt_format])
    iterator = trainer.train_iterator()
    for _ in range(3):
        trainer.train_step(iterator)
    trainer.skipped_iterations += 1  # a counter that differs from its fresh value
    expected = _progress(trainer)
    trainer.save()
    trainer.async_saves.wait()
    rng = get_all_rng_states()
    expected_draw = torch.rand(5)
    torch.rand(7)
    resumed = setup(ARGV + ["--load", save])
    assert _progress(resumed) == expected
    assert torch.equal(torch.rand(5), expected_draw)  # the RNG streams continue from the save
    set_all_rng_states(rng)
    finetuned = setup(ARGV + ["--load", save, "--finetune"])
    assert (finetuned.iteration, finetuned.consumed_samples, finetuned.skipped_iterations) == (0, 0, 0)
    assert finetuned.scheduler.num_steps == 0
