"""FSDP through the training loop: ``--use-torch-fsdp2``, ``--use-torch-fsdp`` and HSDP.

The trainer's losses and final weights (gathered over DP and TP) at DP=2
(FSDP2, FSDP1, FSDP2 with TP=2 and sequence parallelism) and DP=4 (HSDP 2 x 2)
equal the single-process run's, and an FSDP2 checkpoint (Megatron layout, the
unsharded ``model`` entry) resumes with the losses and final weights of an
uninterrupted run and loads into a run without FSDP. The reference moves
every weight by more than the tolerance, so a run without updates fails.

With context parallelism (4 processes) FSDP shards over the DP x CP ranks and
sums the gradient over CP: FSDP2 at CP2 x DP2 (ring, Ulysses, KV all-gather),
FSDP1 and HSDP at CP2 x DP2, FSDP2 at CP2 x TP2 with sequence parallelism and
at CP4 hybrid (2 Ulysses x 2 ring; both DP = 1, sharded over CP alone) give
the single-process losses, grad norms and weights of two steps; an FSDP2
checkpoint written at CP2 x DP2 resumes exactly. A hybrid stack (Mamba2 after Zamba's shared block, Mamba2
beside attention, gated DeltaNet, MLP) under FSDP2 at DP2 and at TP2 with sequence parallelism equals its single-process run.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import pytest
import torch

from core.launcher import run_distributed
from tests.distributed.test_training_equivalence import BASE

VOCAB = 100
FIVE = BASE[:]
FIVE[FIVE.index("--train-iters") + 1] = "5"
# a hybrid stack: Zamba's Mamba2 after a shared block (attention over [hidden; embeddings] and an MLP, with
# adapters), Falcon-H1's Mamba2 beside attention, a gated DeltaNet, an MLP (one group, replicated at TP 2)
HYBRID = FIVE[:]
HYBRID[HYBRID.index("--num-layers") + 1] = "4"
HYBRID += ["--hybrid-override-pattern", "ZHG-", "--shared-block-adapter-rank", "4", "--mamba-head-dim", "16",
           "--mamba-num-groups", "1",
           "--mamba-state-dim", "8", "--mamba-chunk-size", "8", "--linear-num-key-heads", "2",
           "--linear-num-value-heads", "4", "--linear-key-head-dim", "16", "--linear-value-head-dim", "16"]
HYBRID_RUNS = {"hybrid_fsdp2": ["--use-torch-fsdp2"],
               "hybrid_fsdp2_tp2_sp": ["--use-torch-fsdp2", "--tensor-model-parallel-size", "2", "--sequence-parallel"]}


def _weights(trainer) -> Optional[Dict[str, torch.Tensor]]:
    """The fp32 weights unsharded over DP and TP, on DP rank 0 (None elsewhere); collective."""
    from core.distributed.fsdp import fsdp_info
    from tests.distributed.test_fsdp import _unshard_tp

    full = {k: v.detach().clone() for k, v in trainer.dp.model_state()["model"].items()}
    if trainer.state.tp > 1:
        full = _unshard_tp(full, fsdp_info(trainer.models[0]).specs, trainer.state.tp_group)
    return full if trainer.state.dp_rank == 0 else None


def _run(argv: List[str], steps: int, snapshots: Tuple[int, ...] = ()) -> Dict[str, object]:
    """Losses and grad norms of ``steps`` steps; the weights after the last (and after each step in ``snapshots``)."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    result: Dict[str, object] = {"losses": [], "grad_norms": []}
    if 0 in snapshots:
        result["weights_0"] = _weights(trainer)
    for step in range(1, steps + 1):
        outcome = trainer.train_step(iterator)
        result["losses"].append(outcome.loss)
        result["grad_norms"].append(outcome.grad_norm)
        if step in snapshots:
            result[f"weights_{step}"] = _weights(trainer)
    result["weights"] = _weights(trainer)
    return result


def _save_after(argv: List[str], steps: int, save: str) -> None:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + ["--save", save])
    iterator = trainer.train_iterator()
    for _ in range(steps):
        trainer.train_step(iterator)
    trainer.save()


def worker(rank: int, world_size: int, tmp: str) -> Dict[str, object]:
    results: Dict[str, object] = {}
    if world_size == 1:
        results["reference"] = _run(FIVE, 5, snapshots=(0, 2, 3))
        results["hybrid_reference"] = _run(HYBRID, 3, snapshots=(0,))
    elif world_size == 2:
        for name, flags in {"fsdp2": ["--use-torch-fsdp2"], "fsdp1": ["--use-torch-fsdp"],
                            "fsdp2_tp2_sp": ["--use-torch-fsdp2", "--tensor-model-parallel-size", "2",
                                             "--sequence-parallel"]}.items():
            results[name] = _run(FIVE + flags, 3)
        for name, flags in HYBRID_RUNS.items():
            results[name] = _run(HYBRID + flags, 3)
        save = os.path.join(tmp, "fsdp2_ckpt")
        _save_after(FIVE + ["--use-torch-fsdp2"], 2, save)
        results["resumed"] = _run(FIVE + ["--use-torch-fsdp2", "--load", save], 3)
        results["resumed_without_fsdp"] = _run(FIVE + ["--load", save], 3)
    else:
        results["hsdp"] = _run(FIVE + ["--use-torch-fsdp2", "--hsdp-replicate-size", "2"], 3)
        for name, flags in CONTEXT_PARALLEL_RUNS.items():
            results[name] = _run(FIVE + flags, 2)
        save = os.path.join(tmp, "fsdp2_cp2_ckpt")
        _save_after(FIVE + CONTEXT_PARALLEL_RUNS["fsdp2_cp2_ring"], 2, save)
        results["cp2_resumed"] = _run(FIVE + CONTEXT_PARALLEL_RUNS["fsdp2_cp2_ring"] + ["--load", save], 1)
    return results if rank == 0 else None


def _cp2(algo: str) -> List[str]:
    return ["--context-parallel-size", "2", "--context-parallel-algo", algo]


# 4 processes: CP2 x DP2 unless TP2 or CP4 is given (then DP = 1: sharded over CP alone)
CONTEXT_PARALLEL_RUNS = {
    "fsdp2_cp2_ring": ["--use-torch-fsdp2"] + _cp2("megatron_cp_algo"),
    "fsdp2_cp2_ulysses": ["--use-torch-fsdp2"] + _cp2("ulysses_cp_algo"),
    "fsdp2_cp2_kvallgather": ["--use-torch-fsdp2"] + _cp2("kvallgather_cp_algo"),
    "fsdp2_cp4_hybrid": ["--use-torch-fsdp2", "--context-parallel-size", "4", "--context-parallel-algo",
                         "hybrid_cp_algo", "--ulysses-degree-in-cp", "2"],
    "fsdp1_cp2_ring": ["--use-torch-fsdp"] + _cp2("megatron_cp_algo"),
    "hsdp_cp2_ring": ["--use-torch-fsdp2", "--hsdp-replicate-size", "2"] + _cp2("megatron_cp_algo"),
    "fsdp2_cp2_tp2_sp_ring": ["--use-torch-fsdp2", "--tensor-model-parallel-size", "2",
                              "--sequence-parallel"] + _cp2("megatron_cp_algo"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, object]:
    tmp = str(tmp_path_factory.mktemp("fsdp_training"))
    merged: Dict[str, object] = {}
    for world in (1, 2, 4):
        merged.update(run_distributed(world, worker, tmp)[0])
    return merged


# AdamW turns summation-order noise in near-zero gradients (the key bias's gradient is 0 in exact
# arithmetic) into isolated updates of ~1e-6, hence atol 1e-5 on weights (as in test_fsdp.py).
WEIGHT_RTOL, WEIGHT_ATOL = 1e-5, 1e-5


def _unpad(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """The vocabulary's rows (the padding differs with TP)."""
    return tensor[:VOCAB] if name.endswith(("word_embeddings.weight", "output_layer.weight")) else tensor


def _close(actual: Dict[str, object], expected_losses: List[float], expected_weights: Dict) -> None:
    torch.testing.assert_close(torch.tensor(actual["losses"]), torch.tensor(expected_losses), rtol=1e-5, atol=0)
    weights = actual["weights"]
    assert set(weights) == set(expected_weights)
    for name, value in weights.items():
        value, expected = _unpad(name, value), _unpad(name, expected_weights[name])
        torch.testing.assert_close(value, expected, rtol=WEIGHT_RTOL, atol=WEIGHT_ATOL,
                                   msg=lambda m: f"weight {name}: {m}")


def test_reference_moves_every_weight_beyond_the_tolerance(runs):
    start, end = runs["reference"]["weights_0"], runs["reference"]["weights_3"]
    for name, value in end.items():
        moved = (value - start[name]).abs().max().item()
        assert moved > 10 * (WEIGHT_ATOL + WEIGHT_RTOL * value.abs().max().item()), f"{name} moved only {moved}"


@pytest.mark.parametrize("name", ["fsdp2", "fsdp1", "fsdp2_tp2_sp", "hsdp"])
def test_fsdp_training_equals_single_process(runs, name):
    reference = runs["reference"]
    _close(runs[name], reference["losses"][:3], reference["weights_3"])


def test_hybrid_reference_moves_every_weight(runs):
    """Beyond the tolerance, so a weight FSDP failed to update fails the comparison (the Mamba dt biases, at -6,
    move least: about 1.3 x their tolerance)."""
    start, end = runs["hybrid_reference"]["weights_0"], runs["hybrid_reference"]["weights"]
    for name, value in end.items():
        moved = (value - start[name]).abs().max().item()
        assert moved > WEIGHT_ATOL + WEIGHT_RTOL * value.abs().max().item(), f"{name} moved only {moved}"


@pytest.mark.parametrize("name", list(HYBRID_RUNS))
def test_fsdp2_of_a_hybrid_stack_equals_single_process(runs, name):
    """Mamba2, Mamba2 beside attention, gated DeltaNet and MLP layers sharded by FSDP2 (and TP 2 + SP)."""
    reference = runs["hybrid_reference"]
    _close(runs[name], reference["losses"], reference["weights"])


def test_fsdp2_checkpoint_resumes_the_run(runs):
    _close(runs["resumed"], runs["reference"]["losses"][2:], runs["reference"]["weights"])


@pytest.mark.parametrize("name", list(CONTEXT_PARALLEL_RUNS))
def test_fsdp_with_context_parallel_equals_single_process(runs, name):
    reference = runs["reference"]
    torch.testing.assert_close(torch.tensor(runs[name]["grad_norms"]), torch.tensor(reference["grad_norms"][:2]),
                               rtol=1e-5, atol=0)
    _close(runs[name], reference["losses"][:2], reference["weights_2"])


def test_fsdp2_checkpoint_at_context_parallel_resumes_the_run(runs):
    torch.testing.assert_close(torch.tensor(runs["cp2_resumed"]["grad_norms"]),
                               torch.tensor(runs["reference"]["grad_norms"][2:3]), rtol=1e-5, atol=0)
    _close(runs["cp2_resumed"], runs["reference"]["losses"][2:3], runs["reference"]["weights_3"])


def test_fsdp2_checkpoint_loads_without_fsdp(runs):
    _close(runs["resumed_without_fsdp"], runs["reference"]["losses"][2:], runs["reference"]["weights"])
