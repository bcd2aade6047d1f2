"""--distributed-timeout-minutes reaches the process groups: a collective that one rank never joins ends
with an error on the rank waiting for it after the timeout, instead of hanging the job.

One 2-process launch: rank 1 skips an all-reduce over the TP group built by ``parallel_state.initialize``
with a 3-second timeout (0.05 minutes, as the flag converts it); rank 0's all-reduce must fail within
seconds. The flag's range check and its conversion are tested without processes.
"""
from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist

from core.launcher import run_distributed
from core.parallel_state import initialize
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.runtime import distributed_timeout

ARGV = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--mock-data", "--vocab-size", "64"]


def worker(rank: int, world_size: int, minutes: float):
    state = initialize(tp=world_size, timeout=distributed_timeout(parse_args(
        ARGV + ["--distributed-timeout-minutes", str(minutes)])))
    if rank == 1:
        time.sleep(9)  # never joins; exits after rank 0 has given up
        return None
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(1), group=state.tp_group.handle)
    except RuntimeError as error:
        return {"seconds": time.monotonic() - start, "message": str(error).splitlines()[0]}
    return {"seconds": time.monotonic() - start, "message": None}


def test_a_collective_one_rank_never_joins_times_out() -> None:
    waited = run_distributed(2, worker, 0.05)[0]
    assert waited["message"] is not None, "the all-reduce returned without its peer"
    assert 2.0 <= waited["seconds"] < 8.0, waited


def test_the_flag_is_checked_and_converted() -> None:
    assert distributed_timeout(parse_args(ARGV)).total_seconds() == 600.0  # Megatron's default, 10 minutes
    with pytest.raises(ArgumentError, match="--distributed-timeout-minutes must be positive"):
        validate_args(parse_args(ARGV + ["--distributed-timeout-minutes", "0"]), 1)
