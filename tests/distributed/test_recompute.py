"""Activation recompute through the trainer equals no recompute, exactly, with dropout on.

One launch of two processes runs every setting on three layouts: TP2 with
sequence parallelism, PP2 with VPP (one layer per virtual stage) and PP2
zero-bubble. Each run is two training steps (fp32, ``--attention-dropout 0.1
--hidden-dropout 0.1``, biases on, SwiGLU) from the same seed and data. On
every rank, the losses, the last step's gradients (``main_grad``) and the
weights after both steps must be bit-identical to the layout's run without
recompute, for full/uniform, full/block, selective and activation-function
recompute. Each setting must also really recompute (its unit runs more often
than without), and under zero-bubble the recomputed linear layers must still
defer exactly as many weight-gradient GEMMs to W as without recompute.

    python -m pytest tests/distributed/test_recompute.py -q
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterator, List

import pytest
import torch

from core.launcher import run_distributed
from core.tensor_parallel.layers import WeightGradStore
from tests.unit.test_recompute import _counting_calls

BASE = [
    "--num-layers", "4", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--seq-length", "32", "--max-position-embeddings", "32", "--position-embedding-type", "rope",
    "--normalization", "RMSNorm", "--swiglu", "--attention-dropout", "0.1", "--hidden-dropout", "0.1",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2", "--lr", "1e-3",
    "--lr-warmup-iters", "1", "--clip-grad", "1.0", "--weight-decay", "0.1", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "11", "--device", "cpu",
    "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1",
]
STEPS = 2
LAYOUTS = {
    "tp2_sp": ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
    "pp2_vpp": ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"],
    "pp2_zb": ["--pipeline-model-parallel-size", "2", "--schedules-method", "zero-bubble"],
}
SETTINGS = {
    "none": [],
    "full_uniform": ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "2"],
    "full_block": ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "1"],
    "selective": ["--recompute-granularity", "selective"],
    "activation": ["--recompute-activation-function"],
}
UNIT = {"full_uniform": "layer", "full_block": "layer", "selective": "core_attention", "activation": "activation"}


@contextlib.contextmanager
def _counting_deferrals() -> Iterator[List[int]]:
    pushed = [0]
    push = WeightGradStore.push

    def counting_push(self, entry):
        pushed[0] += 1
        push(self, entry)

    WeightGradStore.push = counting_push
    try:
        yield pushed
    finally:
        WeightGradStore.push = push


def run_training(argv: List[str]) -> Dict[str, object]:
    """Two steps; this rank's losses, local gradients and weights, and what ran how often."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    with _counting_calls() as calls, _counting_deferrals() as deferred:
        losses = [trainer.train_step(iterator).loss for _ in range(STEPS)]
    grads, weights = {}, {}
    for chunk, model in enumerate(trainer.models):
        for name, param in model.named_parameters():
            grads[f"{chunk}.{name}"] = param.main_grad.detach().clone()
            weights[f"{chunk}.{name}"] = param.data.detach().clone()
    return {"losses": losses, "grads": grads, "weights": weights, "calls": dict(calls), "deferred": deferred[0]}


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    return {name: run_training(argv) for name, argv in configs.items()}


def _setting_args(layout: str, setting: str) -> List[str]:
    """The setting's flags; under VPP a chunk holds one layer, so uniform groups hold one layer too."""
    args = list(SETTINGS[setting])
    if layout == "pp2_vpp" and setting == "full_uniform":
        args[args.index("--recompute-num-layers") + 1] = "1"
    return args


@pytest.fixture(scope="module")
def world2() -> List[Dict[str, Dict]]:
    configs = {f"{layout}/{setting}": BASE + layout_args + _setting_args(layout, setting)
               for layout, layout_args in LAYOUTS.items() for setting in SETTINGS}
    return run_distributed(2, worker, configs)


RECOMPUTED = [s for s in SETTINGS if s != "none"]


@pytest.mark.parametrize("setting", RECOMPUTED)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_recompute_equals_no_recompute_exactly(world2, layout, setting):
    for rank, results in enumerate(world2):
        result, reference = results[f"{layout}/{setting}"], results[f"{layout}/none"]
        assert result["losses"] == reference["losses"], f"rank {rank}"
        for kind in ("grads", "weights"):
            assert set(result[kind]) == set(reference[kind])
            for name, value in reference[kind].items():
                assert torch.equal(result[kind][name], value), f"rank {rank} {kind} {name}"


@pytest.mark.parametrize("setting", RECOMPUTED)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_recompute_happens(world2, layout, setting):
    for results in world2:
        calls, reference = results[f"{layout}/{setting}"]["calls"], results[f"{layout}/none"]["calls"]
        unit = UNIT[setting]
        assert calls[unit] > reference[unit], (calls, reference)
        if unit != "layer":  # finer settings leave whole layers alone
            assert calls["layer"] == reference["layer"]


def test_dropout_is_on_and_training_moves(world2):
    for results in world2:
        losses = results["tp2_sp/none"]["losses"]
        assert len(set(losses)) == STEPS


@pytest.mark.parametrize("setting", RECOMPUTED)
def test_zero_bubble_defers_the_recomputed_linears(world2, setting):
    for results in world2:
        reference = results["pp2_zb/none"]["deferred"]
        assert reference > 0 and results[f"pp2_zb/{setting}"]["deferred"] == reference
        assert results[f"pp2_vpp/{setting}"]["deferred"] == 0
