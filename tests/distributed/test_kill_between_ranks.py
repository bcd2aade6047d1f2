"""A "kill during save" between the ranks' files, on 2 processes (TP=2: one file per rank).

The first launch saves iteration 2, then, during the save of iteration 4, rank 1 waits until rank 0's file
of iteration 4 is complete and SIGKILLs itself before writing its own. Rank 0, left alone in the save's
barrier, fails and records it in ``--save/failures/``. Neither the completion marker nor the tracker names
iteration 4, so the second launch (``--load``) resumes from iteration 2, and its losses of iterations 3 and 4
equal the ones the first launch computed before the kill (an uninterrupted run up to there), bit for bit.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from core import checkpointing
from core.launcher import run_distributed

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "4",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--tensor-model-parallel-size", "2",
    "--distributed-timeout-minutes", "1",
]


def _record_losses(path: str) -> None:
    """Append ``iteration loss`` to ``path`` after every training step (the loss survives a kill)."""
    from mindspeed_llm.training.training import Trainer

    train_step = Trainer.train_step

    def recorded(self, iterator):
        result = train_step(self, iterator)
        with open(path, "a") as handle:
            handle.write(f"{self.iteration} {result.loss!r}\n")
        return result

    Trainer.train_step = recorded


def _kill_rank_1_between_the_files(save: str) -> None:
    """Rank 1's save of iteration 4: once rank 0's file is complete, SIGKILL before writing its own."""
    atomic_save = checkpointing.atomic_save
    rank_0_file = checkpointing.checkpoint_file(save, 4, 0, 0, 1)

    def save_then_die(obj, path):
        if "iter_0000004" in path:
            deadline = time.monotonic() + 60
            while not os.path.exists(rank_0_file) and time.monotonic() < deadline:
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGKILL)
        return atomic_save(obj, path)

    checkpointing.atomic_save = save_then_die


def worker(rank: int, world_size: int, save: str, losses: str, mode: str):
    from mindspeed_llm.training.training import run

    if mode == "kill":
        if rank == 0:
            _record_losses(losses)
        else:
            _kill_rank_1_between_the_files(save)
        run(ARGV + ["--save", save, "--save-interval", "2"])
        return None
    return run(ARGV + ["--load", save]).losses


def test_a_kill_between_the_ranks_files_resumes_from_the_previous_checkpoint(tmp_path) -> None:
    save, losses = str(tmp_path / "ckpt"), str(tmp_path / "losses.txt")
    with pytest.raises(RuntimeError, match=r"rank\(s\) \[1\] exited with code\(s\) \[-9\]|rank 0 failed"):
        run_distributed(2, worker, save, losses, "kill", timeout=240)
    assert os.path.isfile(checkpointing.checkpoint_file(save, 4, 0, 0, 1)), "rank 0 wrote its file"
    assert not os.path.exists(checkpointing.checkpoint_file(save, 4, 1, 0, 1)), "rank 1 died before its file"
    assert checkpointing.complete_iterations(save) == [2]
    assert checkpointing.read_tracker(save) == (2, False)
    before_kill = {int(it): float(loss) for it, loss in (line.split() for line in open(losses))}
    assert sorted(before_kill) == [1, 2, 3, 4]
    record = json.load(open(os.path.join(save, "failures", "rank_00000.json")))  # rank 0's failure: rank 1 is gone
    assert (record["rank"], record["world_size"], record["iteration"]) == (0, 2, 4), record

    resumed = run_distributed(2, worker, save, losses, "resume", timeout=240)
    assert resumed[0] == resumed[1] == [before_kill[3], before_kill[4]]
