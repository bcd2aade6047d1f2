"""Context parallelism of recurrent mixers equals one process: the state passed from CP rank to CP rank.

A training step of tiny models (fp32, two micro-batches): the loss and every parameter's gradient
(``main_grad``, unsharded over TP) at CP 2 and CP 4 must equal the single-process run within 1e-5 relative. Models: pure Mamba2 (a chunk size of 3 that divides no CP run), pure Mamba1, and the hybrid
``M*M-`` (Mamba, attention, Mamba, MLP), the attention layer under the existing CP algorithms. Layouts:
the ring's load-balanced chunks (at CP 4 a chunk of 2 tokens, shorter than the conv's 3 carried inputs),
contiguous parts (the ring with ``--attention-mask-type general``), Ulysses and the
hybrid 2 x 2 (whose chain visits CP ranks 0, 2, 3, 1), CP 2 x TP 2 with sequence parallelism; and packed
documents (``--reset-attention-mask``) with documents that cross CP chunk boundaries and boundaries where
a new one starts (checked on the data). One launch of 2 processes and one of 4.

    python -m pytest -q tests/distributed/test_recurrent_context_parallel.py
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

import pytest
import torch

from core.launcher import run_distributed

COMMON = ["--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "8", "--normalization", "RMSNorm",
          "--disable-bias-linear", "--micro-batch-size", "1", "--global-batch-size", "2", "--train-iters", "1",
          "--optimizer", "sgd", "--lr", "0.5", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3",
          "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
          "--hidden-dropout", "0", "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1",
          "--init-method-std", "0.3", "--hidden-size", "16", "--num-attention-heads", "4"]
MAMBA2 = ["--num-layers", "2", "--hybrid-override-pattern", "MM", "--mamba-head-dim", "8", "--mamba-num-groups", "2",
          "--mamba-state-dim", "4", "--mamba-chunk-size", "3", "--position-embedding-type", "none"]
MAMBA1 = ["--num-layers", "2", "--hybrid-override-pattern", "MM", "--mamba-version", "1", "--mamba-state-dim", "4",
          "--mamba-d-conv", "3", "--mamba-dt-rank", "2", "--position-embedding-type", "none"]
HYBRID = ["--num-layers", "4", "--hybrid-override-pattern", "M*M-", "--mamba-head-dim", "8", "--mamba-num-groups", "1",
          "--mamba-state-dim", "4", "--mamba-chunk-size", "3", "--ffn-hidden-size", "32", "--swiglu",
          "--position-embedding-type", "rope"]
DOCUMENTS = ["--reset-attention-mask", "--eod-mask-loss"]  # (positions restart too where a layer reads them)
MODELS = {"mamba2": MAMBA2, "mamba1": MAMBA1, "hybrid": HYBRID, "documents": MAMBA2 + DOCUMENTS,
          "hybrid_documents": HYBRID + DOCUMENTS + ["--reset-position-ids"]}
RING, ULYSSES, HYBRID_CP = "megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo"
CONTIGUOUS = ["--attention-mask-type", "general"]  # the ring without load balancing: one part per rank


def _cp(size: int, algo: str = RING, *extra: str) -> List[str]:
    return ["--context-parallel-size", str(size), "--context-parallel-algo", algo, *extra]


# layout name -> (model, flags), by world size
LAYOUTS: Dict[int, Dict[str, Tuple[str, List[str]]]] = {
    2: {"mamba2_ring_cp2": ("mamba2", _cp(2)),
        "mamba2_contiguous_cp2": ("mamba2", _cp(2, RING, *CONTIGUOUS)),
        "hybrid_ulysses_cp2": ("hybrid", _cp(2, ULYSSES)),
        "documents_ring_cp2": ("documents", _cp(2))},
    4: {"mamba2_ring_cp4": ("mamba2", _cp(4)),
        "mamba1_ring_cp4": ("mamba1", _cp(4)),
        "hybrid_ring_cp4": ("hybrid", _cp(4)),
        "hybrid_2x2": ("hybrid", _cp(4, HYBRID_CP, "--ulysses-degree-in-cp", "2")),
        "mamba2_ring_cp2_tp2_sp": ("mamba2", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "documents_ring_cp4": ("documents", _cp(4)),
        "hybrid_documents_contiguous_cp4": ("hybrid_documents", _cp(4, RING, *CONTIGUOUS))},
}
TOLERANCE = 1e-5


def _train(argv: List[str], documents: Optional[List[torch.Tensor]] = None) -> Dict[str, object]:
    """One step: its loss and every parameter's gradient, unsharded over TP (``documents`` collects the
    micro-batches' document numbers)."""
    from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    if documents is not None:
        iterator = _recorded(iterator, documents)
    losses = [trainer.train_step(iterator).loss]
    grads = {name: gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
             for name, param in trainer.model.named_parameters()}
    return {"losses": losses, "grads": grads}


def _recorded(batches: Iterator[Dict[str, torch.Tensor]], documents: List[torch.Tensor]) -> Iterator[Dict]:
    for batch in batches:
        documents.append(batch["document_ids"].clone())
        yield batch


def _worker(rank: int, world: int, jobs: Dict[str, List[str]]) -> Dict[str, Dict[str, object]]:
    return {name: _train(argv) for name, argv in jobs.items()}


def _differences(result: Dict[str, object], reference: Dict[str, object]) -> List[str]:
    wrong = [f"losses {result['losses']} != {reference['losses']}"
             for a, b in zip(result["losses"], reference["losses"]) if abs(a - b) > TOLERANCE * abs(b)]
    for name, grad in reference["grads"].items():
        error = (result["grads"][name] - grad).abs().max().item()
        if error > TOLERANCE * max(grad.abs().max().item(), 1e-3):
            wrong.append(f"{name} grad off by {error:.2e}")
    return wrong


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict[str, object]]:
    documents: List[torch.Tensor] = []
    results = {model: _train(COMMON + extra, documents if model == "documents" else None)
               for model, extra in MODELS.items()}
    results["documents"]["document_ids"] = torch.cat(documents)  # [micro-batches, s]
    return results


def test_the_documents_cross_and_start_at_cp_chunk_boundaries(references) -> None:
    ids = references["documents"]["document_ids"]  # [n, 16]
    boundaries = [2, 4, 6, 8, 10, 12, 14]  # every CP chunk boundary at CP 2 and CP 4, balanced or not
    continued = [(ids[:, p - 1] == ids[:, p]).any().item() for p in boundaries]
    started = [(ids[:, p - 1] != ids[:, p]).any().item() for p in boundaries]
    assert all(continued) and any(started), ids
    assert references["documents"]["losses"] != references["mamba2"]["losses"]  # the documents restart the state


@pytest.mark.parametrize("world", sorted(LAYOUTS))
def test_recurrent_context_parallel_equals_one_process(world: int, references) -> None:
    layouts = LAYOUTS[world]
    jobs = {name: COMMON + MODELS[model] + flags for name, (model, flags) in layouts.items()}
    per_rank = run_distributed(world, _worker, jobs)
    wrong = {}
    for rank, results in enumerate(per_rank):
        for name, (model, _) in layouts.items():
            differences = _differences(results[name], references[model])
            if differences:
                wrong[f"{name} rank {rank}"] = differences[:3]
    assert not wrong, f"differ from one process: {wrong}"
