"""--exit-signal-handler on 2 processes: a SIGTERM that reaches one rank stops every rank after the same step.

Rank 1 alone receives SIGTERM during step 2 of a DP=2 run; the ranks agree through one all-reduce after each
step, so both end at iteration 2, the checkpoint of iteration 2 is complete for both, and both return normally.
"""
from __future__ import annotations

import os
import signal

from core.launcher import run_distributed

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "1", "--global-batch-size", "2", "--train-iters", "6",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--exit-signal-handler",
    "--use-distributed-optimizer",
]


def worker(rank: int, world_size: int, save: str):
    from mindspeed_llm.training.pretrain_task import PretrainTask
    from mindspeed_llm.training.training import run

    if rank == 1:
        forward_step, calls = PretrainTask.forward_step, []

        def forward_then_signal(self, batch, model):
            calls.append(1)
            if len(calls) == 2:  # one micro-batch per rank per step: during step 2
                os.kill(os.getpid(), signal.SIGTERM)
            return forward_step(self, batch, model)

        PretrainTask.forward_step = forward_then_signal
    trainer = run(ARGV + ["--save", save, "--save-interval", "100"])
    return trainer.iteration


def test_a_signal_on_one_rank_stops_every_rank_after_the_same_step(tmp_path) -> None:
    save = str(tmp_path / "ckpt")
    assert run_distributed(2, worker, save) == [2, 2]
    assert open(os.path.join(save, "latest_checkpointed_iteration.txt")).read().strip() == "2"
    assert os.path.isdir(os.path.join(save, "iter_0000002"))
