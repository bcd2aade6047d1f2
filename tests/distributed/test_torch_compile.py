"""``--use-torch-compile`` composes with TP=2 + sequence parallelism, PP=2 with VPP and FSDP2 (one launch).

Each layout trains two steps (fp32, 4 layers, hidden 64, seq 32, SwiGLU, RMSNorm, no dropout) eagerly and
with every layer compiled by inductor; on every rank the losses, the gradients (``main_grad``; FSDP2 drops
its gradients after the step) and the weights (FSDP2: the local shards) after both steps agree within 1e-5. TP2/SP also runs with full recompute
and dropout on (inductor draws eager's random numbers, so it equals eager's recompute run). Each compiled
run reports its graphs and graph breaks; the collectives of the TP layers may split a layer's graph.

    python -m pytest -q tests/distributed/test_torch_compile.py
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed

BASE = [
    "--num-layers", "4", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--seq-length", "32", "--max-position-embeddings", "32", "--position-embedding-type", "rope",
    "--normalization", "RMSNorm", "--swiglu", "--micro-batch-size", "2", "--global-batch-size", "4",
    "--train-iters", "2", "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size",
    "100", "--seed", "11", "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0",
]
NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]
RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
LAYOUTS = {
    "tp2_sp": ["--tensor-model-parallel-size", "2", "--sequence-parallel"] + NO_DROPOUT,
    "tp2_sp_recompute": ["--tensor-model-parallel-size", "2", "--sequence-parallel"] + RECOMPUTE,
    "pp2_vpp": ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"] + NO_DROPOUT,
    "fsdp2": ["--use-torch-fsdp2"] + NO_DROPOUT,
}
COMPILE = ["--use-torch-compile"]
STEPS = 2
TOLERANCE = 1e-5


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard (FSDP2), or the tensor."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def run_training(argv: List[str]) -> Dict[str, object]:
    """Two steps: this rank's losses, last gradients and weights, and the compile figures (compiled runs)."""
    import torch._dynamo

    from core.transformer.compile import CompileReport
    from mindspeed_llm.training.training import setup

    torch._dynamo.reset()
    trainer = setup(argv)
    report = CompileReport(0, "inductor")
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(STEPS)]
    grads, weights = {}, {}
    for chunk, model in enumerate(trainer.models):
        for name, param in model.named_parameters():
            grad = getattr(param, "main_grad", None)  # FSDP2's optimizer drops its gradients after the step
            if grad is not None:
                grads[f"{chunk}.{name}"] = grad.detach().clone()
            weights[f"{chunk}.{name}"] = _local(param.data).detach().clone()
    return {"losses": losses, "grads": grads, "weights": weights, "figures": report.figures()}


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    return {name: run_training(argv) for name, argv in configs.items()}


@pytest.fixture(scope="module")
def world2() -> List[Dict[str, Dict]]:
    configs = {}
    for layout, layout_args in LAYOUTS.items():
        configs[f"{layout}/eager"] = BASE + layout_args
        configs[f"{layout}/compiled"] = BASE + layout_args + COMPILE
    return run_distributed(2, worker, configs)


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_compiled_equals_eager(world2, layout):
    for rank, results in enumerate(world2):
        compiled, eager = results[f"{layout}/compiled"], results[f"{layout}/eager"]
        assert compiled["figures"]["graphs"] > 0, f"rank {rank}: nothing was compiled"
        print(f"{layout} rank {rank}: {compiled['figures']}")
        assert max(abs(a - b) for a, b in zip(compiled["losses"], eager["losses"])) <= TOLERANCE
        for kind in ("grads", "weights"):
            assert set(compiled[kind]) == set(eager[kind])
            for name, value in eager[kind].items():
                assert torch.allclose(compiled[kind][name], value, rtol=0, atol=TOLERANCE), \
                    f"rank {rank} {kind} {name}"
