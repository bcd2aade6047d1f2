"""Invalid data-parallel / optimizer-memory flag combinations stop before training, naming the flags."""
from __future__ import annotations

import pytest

from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

PRECISION_AWARE = ["--use-distributed-optimizer", "--use-precision-aware-optimizer"]
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
    # --use-precision-aware-optimizer: the distributed optimizer's Adam, dtypes the model can use
    (["--use-precision-aware-optimizer"], "--use-precision-aware-optimizer needs --use-distributed-optimizer"),
    (PRECISION_AWARE + ["--use-torch-fsdp2"], "not supported with --use-torch-fsdp2"),
    (["--use-precision-aware-optimizer", "--use-torch-fsdp"], "not supported with --use-torch-fsdp ("),
    (PRECISION_AWARE + ["--swap-optimizer"], "not supported with --swap-optimizer"),
    (PRECISION_AWARE + ["--optimizer", "sgd"], "use --optimizer adam"),
    (PRECISION_AWARE + ["--fp16", "--main-grads-dtype", "bf16"], "--main-grads-dtype bf16 is for --bf16 models"),
    (PRECISION_AWARE + ["--main-params-dtype", "fp16"], "--main-params-dtype fp16 needs a --bf16 or --fp16 model"),
    *(([flag, value], f"{flag} has no effect without --use-precision-aware-optimizer")
      for flag, value in (("--main-grads-dtype", "bf16"), ("--main-params-dtype", "fp16"),
                          ("--exp-avg-dtype", "fp8"), ("--exp-avg-sq-dtype", "bf16"))),
])
def test_invalid_combinations_are_named(extra, expected):
    message = _error(extra)
    assert expected in message and "\n" not in message


def test_valid_combinations_pass():
    for extra in (["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"],
                  ["--use-torch-fsdp2", "--hsdp-replicate-size", "2"], ["--swap-optimizer"],
                  ["--use-distributed-optimizer", "--swap-optimizer"], ["--exp-avg-dtype", "fp32"],
                  PRECISION_AWARE + ["--bf16", "--main-grads-dtype", "bf16", "--main-params-dtype", "fp16",
                                     "--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype", "fp16"],
                  PRECISION_AWARE + ["--fp16", "--main-params-dtype", "fp16", "--exp-avg-dtype", "bf16"]):
        validate_args(parse_args(BASE + extra), 4)
