"""Data parallelism: plain, overlapped and with the distributed optimizer, equal DP=1.

Three steps of the real training step at DP=2 and DP=4, with small buckets
(several per model), ``--overlap-grad-reduce``, ``--use-distributed-optimizer``
and ``--overlap-param-gather``, must give the weights of the single-process
run (fp32, 1e-6 relative) on every rank, so a replica that missed the
distributed optimizer's parameter all-gather fails; every weight of the
reference must have moved, so a run without updates fails. Also: overlapped reductions run only during the
last micro-batch (one collective per bucket per step); the distributed
optimizer's state per rank is 1/DP of the plain optimizer's; ``--swap-optimizer``
(moments streamed from host memory in chunks) changes no result; a run saved at
DP=2 with the distributed optimizer and resumed at DP=4 continues with the
loss of the run that kept DP=2.
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from tests.distributed.test_training_equivalence import BASE, STEPS

BUCKETS = ["--ddp-bucket-size", "6000"]
VARIANTS = {
    "plain": [],
    "overlap": ["--overlap-grad-reduce"],
    "distopt": ["--use-distributed-optimizer"],
    "distopt_overlap": ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"],
    "swap": ["--swap-optimizer", "--swap-optimizer-chunk-size", "3000"],
    "distopt_swap": ["--use-distributed-optimizer", "--swap-optimizer", "--swap-optimizer-chunk-size", "3000"],
}


def _optimizer_state_bytes(trainer) -> int:
    optimizer = trainer.optimizer.optimizer
    total = 0
    for state in optimizer.state.values():
        total += sum(v.numel() * v.element_size() for k, v in state.items() if k != "step")
    return total


def run_variant(argv: List[str]) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    initial = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(STEPS)]
    trainer.finish_param_sync()
    weights = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    moved = {n: (weights[n] - initial[n]).abs().max().item() for n in weights}
    collectives = sum(bucket.collectives for bucket in trainer.dp.grad_buffers[0].buckets)
    return {"losses": losses, "weights": weights, "moved": moved,
            "collectives": collectives, "buckets": len(trainer.dp.grad_buffers[0].buckets),
            "state_bytes": _optimizer_state_bytes(trainer)}


def run_resume(save_dir: str, steps_before: int, steps_after: int, argv: List[str]) -> List[float]:
    """Train, save, then (possibly at another DP size) resume; returns the losses after resuming."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + ["--load", save_dir])
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(steps_after)]


def train_and_save(argv: List[str], save_dir: str, steps: int) -> List[float]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + ["--save", save_dir])
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(steps)]
    trainer.save()
    return losses


def worker(rank: int, world_size: int, tmp: str) -> Dict[str, object]:
    results = {name: run_variant(BASE + BUCKETS + flags) for name, flags in VARIANTS.items()}
    if world_size == 2:
        long = BASE[:]  # 5 iterations so the schedule keeps going after the resume point
        long[long.index("--train-iters") + 1] = "5"
        save_dir = os.path.join(tmp, "ckpt")
        results["saved_losses"] = train_and_save(long + BUCKETS + VARIANTS["distopt"], save_dir, 3)
        results["continued"] = run_resume(save_dir, 3, 2, long + BUCKETS + VARIANTS["distopt"])
        results["uninterrupted"] = run_variant_losses(long + BUCKETS + VARIANTS["distopt"], 5)
    return results


def run_variant_losses(argv: List[str], steps: int) -> List[float]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    return [trainer.train_step(iterator).loss for _ in range(steps)]


def resume_worker(rank: int, world_size: int, save_dir: str, argv: List[str]) -> List[float]:
    return run_resume(save_dir, 3, 2, argv)


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("dp"))


@pytest.fixture(scope="module")
def reference(tmp_dir) -> Dict[str, object]:
    return run_distributed(1, worker, tmp_dir)[0]


@pytest.fixture(scope="module")
def dp2_ranks(tmp_dir) -> List[Dict[str, object]]:
    return run_distributed(2, worker, tmp_dir)


@pytest.fixture(scope="module")
def dp4_ranks(tmp_dir) -> List[Dict[str, object]]:
    return run_distributed(4, worker, tmp_dir)


@pytest.fixture(scope="module")
def dp2(dp2_ranks) -> Dict[str, object]:
    return dp2_ranks[0]


@pytest.fixture(scope="module")
def dp4(dp4_ranks) -> Dict[str, object]:
    return dp4_ranks[0]


def _assert_weights(result: Dict, reference: Dict) -> None:
    torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(reference["losses"]), rtol=1e-6, atol=0)
    for name, value in result["weights"].items():
        torch.testing.assert_close(value[:100] if "word_embeddings" in name else value,
                                   reference["weights"][name][:100] if "word_embeddings" in name
                                   else reference["weights"][name], rtol=1e-6, atol=1e-7,
                                   msg=lambda m: f"{name}: {m}")


def _assert_every_rank(per_rank: List[Dict], reference: Dict) -> None:
    for rank, result in enumerate(per_rank):
        try:
            _assert_weights(result, reference)
        except AssertionError as error:
            raise AssertionError(f"rank {rank}: {error}") from None


def test_reference_moves_every_weight(reference):
    """Every weight moved by more than the comparison's tolerance (1e-7 + 1e-6 * |w|, |w| < 2)."""
    for name, moved in reference["plain"]["moved"].items():
        assert moved > 1e-5, f"{name} moved only {moved}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dp2_equals_dp1(dp2_ranks, reference, variant):
    _assert_every_rank([results[variant] for results in dp2_ranks], reference["plain"])


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dp4_equals_dp1(dp4_ranks, reference, variant):
    _assert_every_rank([results[variant] for results in dp4_ranks], reference["plain"])


def test_overlap_reduces_once_per_bucket_per_step(dp2):
    result = dp2["overlap"]
    assert result["buckets"] > 1
    assert result["collectives"] == result["buckets"] * STEPS  # none during the earlier micro-batches


def test_distributed_optimizer_state_is_one_over_dp(reference, dp2, dp4):
    plain = dp2["plain"]["state_bytes"]
    assert plain == reference["plain"]["state_bytes"]
    for result, dp in ((dp2, 2), (dp4, 4)):
        sharded = result["distopt"]["state_bytes"]
        assert abs(sharded - plain / dp) <= 0.01 * plain / dp, (sharded, plain, dp)


def test_resume_at_another_dp_size_continues_the_run(dp2, tmp_dir):
    argv = BASE[:]
    argv[argv.index("--train-iters") + 1] = "5"
    argv += BUCKETS + VARIANTS["distopt"]
    continued_dp4 = run_distributed(4, resume_worker, os.path.join(tmp_dir, "ckpt"), argv)[0]
    expected = dp2["uninterrupted"][3:]
    torch.testing.assert_close(torch.tensor(dp2["continued"]), torch.tensor(expected), rtol=0, atol=0)
    torch.testing.assert_close(torch.tensor(continued_dp4), torch.tensor(expected), rtol=1e-6, atol=0)
