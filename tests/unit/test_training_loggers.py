"""The trainer writes its figures to TensorBoard: read back with tensorboard's own event reader.

A short pretraining run with ``--tensorboard-dir`` must leave event files whose
``lm loss`` scalars are the trainer's losses at the iterations that
``--tensorboard-log-interval`` selects, with the learning rate, grad norm,
throughput, validation loss and (with ``--log-timers-to-tensorboard``) the step
timers beside them.
"""
from __future__ import annotations

import pytest

from mindspeed_llm.training.training import setup, train

pytest.importorskip("tensorboard", reason="tensorboard is an optional extra: pip install -e .[tensorboard]")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "6", "--lr", "1e-3",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "5",
    "--device", "cpu", "--num-workers", "0", "--log-interval", "3", "--eval-interval", "3", "--eval-iters", "1",
]


def _scalars(directory: str):
    events = EventAccumulator(directory, size_guidance={"scalars": 0})
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def test_tensorboard_holds_the_logged_scalars(tmp_path) -> None:
    directory = str(tmp_path / "tb")
    trainer = train(setup(ARGV + ["--tensorboard-dir", directory, "--tensorboard-log-interval", "2",
                                  "--log-timers-to-tensorboard"]))
    scalars = _scalars(directory)
    losses = scalars["lm loss"]
    assert sorted(losses) == [2, 4, 6]  # every second iteration
    for iteration, value in losses.items():
        assert value == pytest.approx(trainer.losses[iteration - 1], rel=1e-6)
    for tag in ("learning-rate", "grad-norm", "loss-scale", "batch-size", "tokens-per-sec", "mfu",
                "forward-backward-time", "optimizer-time"):
        assert sorted(scalars[tag]) == [2, 4, 6], tag
    assert scalars["batch-size"][2] == 4
    assert sorted(scalars["lm loss validation"]) == [3, 6]
    assert "lm loss vs samples" in scalars and sorted(scalars["lm loss vs samples"]) == [8, 16, 24]


def test_no_timers_without_the_flag(tmp_path) -> None:
    directory = str(tmp_path / "tb")
    train(setup(ARGV + ["--tensorboard-dir", directory]))
    scalars = _scalars(directory)
    assert sorted(scalars["lm loss"]) == [1, 2, 3, 4, 5, 6]
    assert "forward-backward-time" not in scalars
