"""``--use-precision-aware-optimizer`` with the distributed optimizer: DP=2 equals DP=1, and a resume is exact.

One launch per world size (1 and 2 gloo processes), three configurations in each: bf16 moments and fp8
moments with an fp32 model, and a bf16 model with bf16 gradient buffers, fp16 master weights, fp8
``exp_avg`` and fp16 ``exp_avg_sq``.

- 4 steps at DP=2 equal the DP=1 run (same global batch) in losses and weights, to the tolerance of the
  other distributed-optimizer tests (1e-6 relative). The batch is one micro-batch per rank at DP=2 and
  clipping is off, so the gradients are the same bits at both sizes and only the optimizer's storage can
  differ: fp8 and fp16 scales must come from each parameter's amax over DP (a scale from this rank's
  piece alone rounds the moments of a parameter cut between the ranks differently; dropping the
  all-reduce fails this test).
- At DP=2, 2 steps, save, load in a new trainer, 2 steps gives the losses and weights of the 4 straight
  steps bit for bit, from a torch_dist checkpoint and from the legacy ``distrib_optim.pt`` (they hold fp32
  values: the dequantised moments, the fp16 masters).
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from tests.distributed.test_data_parallel import BUCKETS
from tests.distributed.test_training_equivalence import BASE

PRECISION_AWARE = ["--use-distributed-optimizer", "--use-precision-aware-optimizer"]
CONFIGS = {
    "bf16_moments": PRECISION_AWARE + ["--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"],
    "fp8_moments": PRECISION_AWARE + ["--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype", "fp8"],
    "bf16_model_all": ["--bf16"] + PRECISION_AWARE + ["--main-grads-dtype", "bf16", "--main-params-dtype", "fp16",
                                                      "--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype", "fp16"],
}
FORMATS = {"torch_dist": ["--ckpt-format", "torch_dist"], "legacy": ["--ckpt-format", "torch"]}
STEPS, SAVED_AT = 4, 2


def _argv(config: str) -> List[str]:
    """One micro-batch per rank at DP=2 (two at DP=1: summed in the same order) and no clipping (its
    coefficient carries the norm's order of summation): the gradients are the same bits at both sizes, so
    only the optimizer's storage can differ (otherwise a bf16 or fp8 rounding flips over the last bit of an
    fp32 gradient)."""
    argv = BASE + BUCKETS + CONFIGS[config]
    for flag, value in (("--train-iters", STEPS), ("--global-batch-size", 4), ("--clip-grad", 0)):
        argv[argv.index(flag) + 1] = str(value)
    return argv


def _train(trainer, steps: int) -> Dict[str, object]:
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(steps)]
    trainer.finish_param_sync()
    return {"losses": losses, "weights": {n: p.detach().float().clone() for n, p in trainer.model.named_parameters()}}


def straight(config: str) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup

    return _train(setup(_argv(config)), STEPS)


def resumed(config: str, flags: List[str], directory: str) -> Dict[str, object]:
    """SAVED_AT steps, save, then a new trainer loads and trains the rest."""
    from mindspeed_llm.training.training import setup

    first = setup(_argv(config) + flags + ["--save", directory])
    before = _train(first, SAVED_AT)["losses"]
    first.save()
    after = _train(setup(_argv(config) + ["--load", directory]), STEPS - SAVED_AT)
    return {"losses": before + after["losses"], "weights": after["weights"]}


def worker(rank: int, world_size: int, root: str) -> Dict[str, object]:
    results: Dict[str, object] = {name: straight(name) for name in CONFIGS}
    if world_size == 2:
        for name in CONFIGS:
            for fmt, flags in FORMATS.items():
                results[f"{name}/{fmt}"] = resumed(name, flags, os.path.join(root, name, fmt))
    return results


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("precision_aware"))


@pytest.fixture(scope="module")
def dp1(root) -> Dict[str, object]:
    return run_distributed(1, worker, root)[0]


@pytest.fixture(scope="module")
def dp2_ranks(root) -> List[Dict[str, object]]:
    return run_distributed(2, worker, root)


def _assert_close(result: Dict, reference: Dict, rtol: float, atol: float) -> None:
    torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(reference["losses"]), rtol=rtol, atol=0)
    for name, value in result["weights"].items():
        torch.testing.assert_close(value, reference["weights"][name], rtol=rtol, atol=atol,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("config", list(CONFIGS))
def test_dp2_equals_dp1(dp2_ranks, dp1, config):
    for rank, results in enumerate(dp2_ranks):
        try:
            _assert_close(results[config], dp1[config], rtol=1e-6, atol=1e-7)
        except AssertionError as error:
            raise AssertionError(f"rank {rank}: {error}") from None


def test_the_storage_changes_the_run(dp1):
    """The dtype flags act: bf16 and fp8 moments train to different weights."""
    bf16, fp8 = dp1["bf16_moments"]["weights"], dp1["fp8_moments"]["weights"]
    assert all(not torch.equal(bf16[name], fp8[name]) for name in bf16 if name.endswith("weight") and
               bf16[name].dim() == 2)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_resume_is_exact(dp2_ranks, config, fmt):
    for rank, results in enumerate(dp2_ranks):
        try:
            _assert_close(results[f"{config}/{fmt}"], results[config], rtol=0, atol=0)
        except AssertionError as error:
            raise AssertionError(f"rank {rank}: {error}") from None
