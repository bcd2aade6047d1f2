"""--exit-signal-handler and --exit-duration-in-mins: stop at an iteration boundary, save, exit 0; resume exactly.

A SIGTERM sent to the process during step 3 (as a scheduler's preemption would) ends the run after that
step with a checkpoint of iteration 3; resuming it with ``--load`` trains iterations 4-6 with exactly the
losses of a run that was never interrupted. A time budget already spent stops after the first step.
Without the handler the flag's absence leaves SIGTERM's default (the process would die): not run here.
"""
from __future__ import annotations

import os
import signal
from typing import List

import pytest

from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.pretrain_task import PretrainTask
from mindspeed_llm.training.training import run

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "6",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1",
]


def _signal_during_step(monkeypatch, step: int) -> None:
    """Send SIGTERM to this process from inside the forward of micro-batch ``step`` (one per step here)."""
    forward_step, calls = PretrainTask.forward_step, []

    def forward_then_signal(self, batch, model):
        calls.append(1)
        if len(calls) == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return forward_step(self, batch, model)

    monkeypatch.setattr(PretrainTask, "forward_step", forward_then_signal)


def test_sigterm_saves_and_the_resumed_run_is_exact(tmp_path, monkeypatch, capsys) -> None:
    uninterrupted = run(ARGV).losses
    save = str(tmp_path / "ckpt")
    with monkeypatch.context() as patch:
        _signal_during_step(patch, 3)
        stopped = run(ARGV + ["--exit-signal-handler", "--save", save, "--save-interval", "100"])
    assert stopped.iteration == 3
    assert "stopping at iteration 3: SIGTERM received" in capsys.readouterr().out
    assert open(os.path.join(save, "latest_checkpointed_iteration.txt")).read().strip() == "3"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, "the handler must be removed after the run"
    resumed = run(ARGV + ["--load", save, "--save", save, "--save-interval", "100"])
    assert resumed.iteration == 6
    assert stopped.losses == uninterrupted[:3]
    assert resumed.losses == uninterrupted[3:], "resuming after SIGTERM must be exact"


def test_a_spent_time_budget_stops_after_one_step(tmp_path, capsys) -> None:
    save = str(tmp_path / "ckpt")
    trainer = run(ARGV + ["--exit-duration-in-mins", "1e-9", "--save", save, "--save-interval", "100"])
    assert trainer.iteration == 1
    assert "--exit-duration-in-mins 1e-09 reached" in capsys.readouterr().out
    assert open(os.path.join(save, "latest_checkpointed_iteration.txt")).read().strip() == "1"


@pytest.mark.parametrize("extra", [["--exit-duration-in-mins", "0"], ["--exit-duration-in-mins", "-5"]])
def test_a_non_positive_duration_is_refused(extra: List[str]) -> None:
    with pytest.raises(ArgumentError, match="--exit-duration-in-mins must be positive"):
        validate_args(parse_args(ARGV + extra), 1)
