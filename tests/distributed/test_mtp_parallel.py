"""Multi-token prediction under TP, SP and PP equals one process.

Three real training steps (fp32, dropout off, gradient clipping on) of a 4-layer model with two
MTP modules: the logged ``lm loss`` and ``mtp_1 loss``/``mtp_2 loss``, the final gradients and the
final weights, unsharded over TP, must match the single-process run to about 1e-5 relative on
every rank. Under PP the MTP modules live on the last stage, which then also holds the word
embeddings (tied or not): its copy must equal the first stage's, gradient included (summed over
the embedding group and counted once in the gradient norm, or clipping would differ).
One 1-process launch for the references and one 2-process launch for every layout.
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from tests.distributed.test_training_equivalence import BASE as TRAINING_BASE

BASE = list(TRAINING_BASE)
BASE[BASE.index("--num-layers") + 1] = "4"
MTP = ["--mtp-num-layers", "2", "--mtp-loss-scaling-factor", "0.3"]
UNTIED = ["--untie-embeddings-and-output-weights"]
STAT_NAMES = ("lm loss", "mtp_1 loss", "mtp_2 loss")
VOCAB = 100
STEPS = 3

REFERENCES = {"tied": BASE + MTP, "untied": BASE + MTP + UNTIED}
WORLD2 = {
    "tp2_untied": (BASE + MTP + UNTIED + ["--tensor-model-parallel-size", "2"], "untied"),
    "tp2_sp_tied": (BASE + MTP + ["--tensor-model-parallel-size", "2", "--sequence-parallel"], "tied"),
    "pp2_untied": (BASE + MTP + UNTIED + ["--pipeline-model-parallel-size", "2"], "untied"),
    "pp2_tied": (BASE + MTP + ["--pipeline-model-parallel-size", "2"], "tied"),
    "pp2_vpp2_untied": (BASE + MTP + UNTIED + ["--pipeline-model-parallel-size", "2",
                                               "--num-layers-per-virtual-pipeline-stage", "1"], "untied"),
}


def run_training(argv: List[str]) -> Dict[str, object]:
    """Three steps: each step's statistics, and this rank's grads and weights (unsharded over TP)."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    stats = [trainer.train_step(iterator).stats for _ in range(STEPS)]
    grads, weights = {}, {}
    for model in trainer.models:
        for name, param in model.named_parameters():
            grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
            weights[name] = gather_full_tensor(param.data, param_meta(param).tp_shard, trainer.state.tp_group)
    return {"stats": stats, "grads": grads, "weights": weights}


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    return {name: run_training(argv) for name, argv in configs.items()}


def _merge(per_rank: List[Dict[str, Dict]]) -> Dict[str, List[Dict]]:
    """Per config, the results of each TP rank: the union of its stages' tensors. A tensor held by two
    stages (the last stage's word embeddings) must be the same on both."""
    merged: Dict[str, Dict[int, Dict]] = {}
    for rank, results in enumerate(per_rank):
        for name, result in results.items():
            argv = REFERENCES.get(name) or WORLD2[name][0]
            tp = int(argv[argv.index("--tensor-model-parallel-size") + 1]) if "--tensor-model-parallel-size" in argv else 1
            entry = merged.setdefault(name, {}).setdefault(rank % tp, {"stats": result["stats"], "grads": {},
                                                                        "weights": {}})
            assert entry["stats"] == result["stats"], f"{name}: stages disagree on the statistics"
            for kind in ("grads", "weights"):
                for key, value in result[kind].items():
                    if key in entry[kind]:
                        torch.testing.assert_close(value, entry[kind][key], rtol=1e-6, atol=1e-7,
                                                   msg=lambda m: f"{name}: the stages' copies of {kind} {key}: {m}")
                    entry[kind][key] = value
    return {name: list(by_tp.values()) for name, by_tp in merged.items()}


def _unpad(tensor: torch.Tensor, name: str) -> torch.Tensor:
    return tensor[:VOCAB] if "word_embeddings" in name or "output_layer" in name else tensor


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict]:
    return {name: results[0] for name, results in _merge(run_distributed(1, worker, REFERENCES)).items()}


@pytest.fixture(scope="module")
def world2() -> Dict[str, List[Dict]]:
    return _merge(run_distributed(2, worker, {name: argv for name, (argv, _) in WORLD2.items()}))


def test_reference_logs_mtp_losses_and_learns(references) -> None:
    for result in references.values():
        first, last = result["stats"][0], result["stats"][-1]
        assert set(STAT_NAMES) <= set(first)
        assert all(1.0 < first[name] < 10.0 for name in STAT_NAMES)  # near ln(100) for a random model
        assert last["mtp_1 loss"] != first["mtp_1 loss"]
        assert any(name.startswith("mtp.layers.1.") for name in result["grads"])


@pytest.mark.parametrize("name", sorted(WORLD2))
def test_world2_equals_single_process(world2, references, name) -> None:
    reference = references[WORLD2[name][1]]
    for result in world2[name]:
        for step, (stats, expected) in enumerate(zip(result["stats"], reference["stats"])):
            for stat in STAT_NAMES:
                torch.testing.assert_close(torch.tensor(stats[stat]), torch.tensor(expected[stat]), rtol=1e-5,
                                           atol=0, msg=lambda m: f"step {step} {stat}: {m}")
        for kind in ("grads", "weights"):
            assert set(result[kind]) == set(reference[kind])
            for key, value in result[kind].items():
                torch.testing.assert_close(_unpad(value, key), _unpad(reference[kind][key], key), rtol=1e-5,
                                           atol=1e-6, msg=lambda m: f"{kind} {key}: {m}")
