"""A TP-2 training step of every registered family gives the TP-1 step.

Per family of ``mindspeed_llm.models.registry.FAMILIES`` (parametrised over
the registry, so a new family without a case here fails): a tiny random HF
model (every weight perturbed, so norms and biases are not trivial) is
converted with the production converter (``tools/convert_ckpt.py``) at TP 1
and at TP 2, and one training step runs through
``mindspeed_llm.training.training.setup`` with ``--load DIR
--use-checkpoint-args --finetune`` and training flags only (mock data,
NullTokenizer with the checkpoint's vocabulary, dropout 0, fp32). The TP-1
step runs in this process; every family's TP-2 step (with and without
sequence parallelism) runs in one 2-process gloo launch. SGD makes the updated
weights linear in the gradients (Adam's first step divides by |g| and amplifies
rounding in near-zero gradients). Losses must agree to
1e-5 relative, and the gradients and the weights after the step, unsharded
over TP (vocabulary padding dropped), to 1e-5 relative on every rank: a
gradient that is a partial sum over TP (q/k-norm weights, norms under SP)
and was not summed fails.

    python -m pytest tests/models/test_zoo_training.py -q
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from mindspeed_llm.models.registry import FAMILIES
from tests.models.test_hf_parity import convert
from tests.models.test_zoo_parity import CASES, build_hf_model

# Families whose parity cases live in test_hf_parity (Llama layout): name -> (config, model, overrides, family)
LLAMA_LAYOUT_CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "llama2": ("LlamaConfig", "LlamaForCausalLM", dict(head_dim=16, vocab_size=101), "llama2"),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(head_dim=16, sliding_window=6), "mistral"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(tie_word_embeddings=True, vocab_size=100), "qwen2"),
}
FAMILY_NAMES = sorted({family.name for family in FAMILIES.values()})
TRAINING = ["--seq-length", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "1",
            "--optimizer", "sgd", "--lr", "0.1", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu",
            "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0",
            "--attention-dropout", "0", "--finetune", "--use-checkpoint-args"]
RTOL, ATOL = 1e-5, 1e-6
# flags a family trains with beside TRAINING: the DSA families train their indexers (the KL loss over every causal
# key for DeepSeek-V3.2 and over every visible compressed entry for DeepSeek-V4, over the selected keys for GLM-5),
# so the indexers' gradients take part too
FAMILY_FLAGS: Dict[str, List[str]] = {
    "deepseek_v32": ["--dsa-indexer-loss-coeff", "0.5"],
    "glm_moe_dsa": ["--dsa-indexer-loss-coeff", "0.5", "--dsa-indexer-use-sparse-loss"],
    "deepseek_v4": ["--dsa-indexer-loss-coeff", "0.5"],  # its CSA layer's indexer, over every visible entry
}


def case_for(family: str) -> Tuple[str, str, Dict[str, Any], str]:
    cases = {**CASES, **LLAMA_LAYOUT_CASES}
    assert family in cases, f"registry family {family!r} has no tiny HF case in test_zoo_parity.CASES or here"
    return cases[family]


def converted(family: str, root: str, tp: int) -> str:
    """The family's tiny HF model converted at ``tp`` with tools/convert_ckpt.py; the mg directory."""
    hf_dir, mg_dir = os.path.join(root, f"{family}_hf"), os.path.join(root, f"{family}_mg_tp{tp}")
    if not os.path.isdir(hf_dir):
        build_hf_model(case_for(family)).save_pretrained(hf_dir)
    if not os.path.isdir(mg_dir):
        convert(hf_dir, mg_dir, case_for(family)[3], tp)
    return mg_dir


def one_step(argv: List[str]) -> Dict[str, Any]:
    """One training step: loss, and every gradient and updated weight unsharded over TP."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    loss = trainer.train_step(trainer.train_iterator()).loss
    grads, weights = {}, {}
    for name, param in trainer.model.named_parameters():
        grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
        weights[name] = gather_full_tensor(param.data, param_meta(param).tp_shard, trainer.state.tp_group)
    return {"loss": loss, "grads": grads, "weights": weights, "vocab": trainer.args.vocab_size}


def _tp2_worker(rank: int, world_size: int, jobs: Dict[Tuple[str, bool], List[str]]) -> Dict[Tuple[str, bool], Any]:
    return {key: one_step(argv) for key, argv in jobs.items()}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> Dict[Tuple[str, int], str]:
    root = str(tmp_path_factory.mktemp("zoo_training"))
    return {(family, tp): converted(family, root, tp) for family in FAMILY_NAMES for tp in (1, 2)}


@pytest.fixture(scope="module")
def tp2_results(checkpoints) -> Dict[Tuple[str, bool], List[Dict[str, Any]]]:
    tp2 = ["--tensor-model-parallel-size", "2"]
    jobs = {(family, sp): TRAINING + FAMILY_FLAGS.get(family, []) + tp2 + ["--load", checkpoints[(family, 2)]]
            + (["--sequence-parallel"] if sp else []) for family in FAMILY_NAMES for sp in (False, True)}
    per_rank = run_distributed(2, _tp2_worker, jobs)
    return {key: [results[key] for results in per_rank] for key in jobs}


def _unpad(name: str, tensor: torch.Tensor, vocab: int) -> torch.Tensor:
    if name.endswith("word_embeddings.weight") or name.endswith("output_layer.weight"):
        return tensor[:vocab]  # padded rows differ with TP (Megatron's padding)
    return tensor


def grad_atol(reference_grad: torch.Tensor) -> float:
    """ATOL, or 1% of the gradient's largest entry where that is below 100 * ATOL: a small gradient (Zamba2's
    Mamba decay parameters take ~1e-5 at this size) is compared as tightly, relative to its size, as a large one."""
    return min(ATOL, 0.01 * reference_grad.abs().max().item())


def assert_same_step(result: Dict[str, Any], reference: Dict[str, Any]) -> None:
    torch.testing.assert_close(torch.tensor(result["loss"]), torch.tensor(reference["loss"]), rtol=RTOL, atol=0)
    vocab = reference["vocab"]
    for kind in ("grads", "weights"):
        assert set(result[kind]) == set(reference[kind])
        for name, value in result[kind].items():
            expected = _unpad(name, reference[kind][name], vocab)
            atol = grad_atol(expected) if kind == "grads" else ATOL
            torch.testing.assert_close(_unpad(name, value, vocab), expected,
                                       rtol=RTOL, atol=atol, msg=lambda m: f"{kind} {name}: {m}")


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_tp2_training_step_equals_tp1(family: str, checkpoints, tp2_results) -> None:
    reference = one_step(TRAINING + FAMILY_FLAGS.get(family, []) + ["--load", checkpoints[(family, 1)]])
    for name, grad in reference["grads"].items():  # every parameter takes part, so a missed sum shows
        assert grad.abs().max().item() > ATOL, f"{family}: reference gradient of {name} is ~0"
    for sp in (False, True):
        for rank, result in enumerate(tp2_results[(family, sp)]):
            try:
                assert_same_step(result, reference)
            except AssertionError as error:
                raise AssertionError(f"{family} TP2 (sequence parallel {sp}) rank {rank}: {error}") from None
