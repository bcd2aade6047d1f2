"""Training at TP=2/4 (with and without sequence parallelism) and DP=2 equals TP=1.

Every fused path on (the four kernel flags and the chunked output layer + loss) at TP=2 with SP, and the
chunked loss alone at TP=4, equal the single-process run without them (which materialises the logits).

Three iterations of the real training step (fp32, dropout off) on the same
mock data and seed: the losses, the final gradients and the final weights,
unsharded over TP, must match the single-process run to about 1e-5 relative
on every rank (every TP rank and every DP replica), so a replica that missed
a gradient all-reduce or a parameter all-gather fails. The reference itself
must have moved every weight by more than that tolerance, so a run that made
no update cannot pass. The model uses GQA with 2 KV heads, so TP=4 also
exercises replicated KV heads, and a vocabulary of 100, so the padded
vocabulary differs with TP.
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from core.launcher import run_distributed
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta

BASE = [
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "32", "--max-position-embeddings", "32",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
    "--add-qkv-bias", "--attention-dropout", "0", "--hidden-dropout", "0", "--micro-batch-size", "2",
    "--global-batch-size", "8", "--train-iters", "3", "--lr", "1e-3", "--lr-warmup-iters", "1",
    "--lr-decay-style", "cosine", "--clip-grad", "0.5", "--weight-decay", "0.1", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "7", "--device", "cpu",
    "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1",
]
UNTIED = ["--untie-embeddings-and-output-weights"]
# the fused kernels' flags (on the CPU: compiled RMSNorm, SwiGLU and RoPE; SDPA attention)
FUSED = ["--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb", "--use-flash-attn"]
STEPS = 3


def run_training(argv: List[str]) -> Dict[str, object]:
    """Three steps; losses plus this rank's grads and weights (unsharded over TP) and the initial weights."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    initial = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}  # local shards
    iterator = trainer.train_iterator()
    losses = [trainer.train_step(iterator).loss for _ in range(STEPS)]
    grads, weights, moved = {}, {}, {}
    for name, param in trainer.model.named_parameters():
        grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
        weights[name] = gather_full_tensor(param.data, param_meta(param).tp_shard, trainer.state.tp_group)
        moved[name] = (param.detach() - initial[name]).abs().max().item()
    return {"losses": losses, "grads": grads, "weights": weights, "moved": moved}


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    return {name: run_training(argv) for name, argv in configs.items()}


def by_config(per_rank: List[Dict[str, Dict]]) -> Dict[str, List[Dict]]:
    """``{config: [rank 0's result, rank 1's, ...]}`` from the launcher's per-rank dicts."""
    return {name: [results[name] for results in per_rank] for name in per_rank[0]}


def _unpad(name: str, tensor: torch.Tensor, vocab: int = 100) -> torch.Tensor:
    if name.endswith("word_embeddings.weight") or name.endswith("output_layer.weight"):
        return tensor[:vocab]
    return tensor


def _assert_every_rank_same(per_rank: List[Dict], reference: Dict) -> None:
    for rank, result in enumerate(per_rank):
        try:
            _assert_same(result, reference)
        except AssertionError as error:
            raise AssertionError(f"rank {rank}: {error}") from None


def _assert_same(result: Dict, reference: Dict) -> None:
    torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(reference["losses"]),
                               rtol=1e-5, atol=0)
    for kind in ("grads", "weights"):
        assert set(result[kind]) == set(reference[kind])
        for name, value in result[kind].items():
            torch.testing.assert_close(_unpad(name, value), _unpad(name, reference[kind][name]),
                                       rtol=1e-5, atol=1e-6, msg=lambda m: f"{kind} {name}: {m}")


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict]:
    return {"tied": run_distributed(1, worker, {"r": BASE})[0]["r"],
            "untied": run_distributed(1, worker, {"r": BASE + UNTIED})[0]["r"]}


@pytest.fixture(scope="module")
def world2() -> Dict[str, List[Dict]]:
    configs = {
        "tp2": BASE + ["--tensor-model-parallel-size", "2"],
        "tp2_sp": BASE + ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
        "dp2": BASE,
        # every fused path: the four kernel flags and the output layer + loss in chunks of 16 of the 100 entries
        "tp2_sp_fused": BASE + ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                "--cross-entropy-chunk-size", "16"] + FUSED,
    }
    return by_config(run_distributed(2, worker, configs))


@pytest.fixture(scope="module")
def world4() -> Dict[str, List[Dict]]:
    configs = {
        "tp4": BASE + UNTIED + ["--tensor-model-parallel-size", "4"],
        "tp4_sp": BASE + UNTIED + ["--tensor-model-parallel-size", "4", "--sequence-parallel"],
        "tp2_dp2_sp": BASE + ["--tensor-model-parallel-size", "2", "--sequence-parallel"],
        "tp4_chunked_ce": BASE + UNTIED + ["--tensor-model-parallel-size", "4", "--cross-entropy-chunk-size", "7"],
    }
    return by_config(run_distributed(4, worker, configs))


@pytest.mark.parametrize("kind", ["tied", "untied"])
def test_reference_moves_every_weight_beyond_the_tolerance(references, kind):
    """A run without updates (or one that skipped a parameter) cannot match the reference."""
    reference = references[kind]
    for name, value in reference["weights"].items():
        tolerance = 1e-6 + 1e-5 * value.abs().max().item()
        assert reference["moved"][name] > 10 * tolerance, f"{name} moved only {reference['moved'][name]}"


@pytest.mark.parametrize("name", ["tp2", "tp2_sp", "dp2", "tp2_sp_fused"])
def test_world2_equals_single_process(world2, references, name):
    _assert_every_rank_same(world2[name], references["tied"])


@pytest.mark.parametrize("name,reference", [("tp4", "untied"), ("tp4_sp", "untied"), ("tp2_dp2_sp", "tied"),
                                            ("tp4_chunked_ce", "untied")])
def test_world4_equals_single_process(world4, references, name, reference):
    _assert_every_rank_same(world4[name], references[reference])
