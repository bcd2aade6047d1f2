"""Invalid data-parallel / optimizer-memory flag combinations stop before training, naming the flags."""
from __future__ import annotations

import pytest

from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
        "--micro-batch-size", "1", "--train-iters", "2", "--lr", "1e-3", "--mock-data", "--vocab-size", "128"]


def _error(extra, world_size: int = 2) -> str:
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + extra), world_size)
    return str(info.value)


@pytest.mark.parametrize("extra,expected", [
    (["--overlap-param-gather"], "--overlap-param-gather needs --use-distributed-optimizer"),
    (["--use-torch-fsdp2", "--use-distributed-optimizer"], "drop --use-distributed-optimizer"),
    (["--use-torch-fsdp", "--use-distributed-optimizer"], "drop --use-distributed-optimizer"),
    (["--use-torch-fsdp2", "--swap-optimizer"], "--swap-optimizer is not supported with --use-torch-fsdp2"),
    (["--use-torch-fsdp2", "--use-torch-fsdp"], "mutually exclusive"),
    (["--use-torch-fsdp2", "--fp16"], "--fp16"),
    (["--hsdp-replicate-size", "2"], "--hsdp-replicate-size needs --use-torch-fsdp2"),
    (["--ddp-bucket-size", "0"], "--ddp-bucket-size 0 must be positive"),
])
def test_invalid_combinations_are_named(extra, expected):
    message = _error(extra)
    assert expected in message and "\n" not in message


def test_valid_combinations_pass():
    for extra in (["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"],
                  ["--use-torch-fsdp2", "--hsdp-replicate-size", "2"], ["--swap-optimizer"],
                  ["--use-distributed-optimizer", "--swap-optimizer"]):
        validate_args(parse_args(BASE + extra), 4)
