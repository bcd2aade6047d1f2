"""LoRA under FSDP: ``--lora-target-modules`` with ``--use-torch-fsdp2`` / ``--use-torch-fsdp``.

One process trains LoRA r=4 (qkv, proj, fc1, fc2, the tied word embeddings as a module to save, Adam) for
three steps from a base checkpoint (``--load BASE --finetune``, a plain run's weights after one step) and
saves its adapters after step 1. One 2-process launch then runs at DP 2:

* FSDP2 and FSDP1, each also as HSDP (2 replicas): the same losses and grad norms (rel 1e-5), the same adapters after three steps
  (atol 1e-5), and every base weight bitwise the base checkpoint's;
* FSDP2 saving after step 1, then a new FSDP2 trainer with ``--lora-load``: steps 2 and 3 as one process
  (optimizer state, schedule and iteration restored), its checkpoint holding exactly the DDP run's keys;
* that FSDP2 checkpoint resumed under DDP, and the one-process (DDP) checkpoint resumed under FSDP2;
* FSDP2 with --bf16 (adapters alone): inside the forward the base weights are bf16 and the adapters fp32 (their
  own FSDP unit, fp32 moments); losses, grad norms and adapters are the one-process bf16 run's;
* FSDP2 with TP 2 and sequence parallelism (DP 1, from the initialisation): the losses and grad norms of one
  process (the TP sums of the adapters' partial gradients on FSDP's shards).

    python -m pytest -q tests/distributed/test_lora_fsdp.py
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional

import pytest
import torch

from core.launcher import run_distributed

TARGETS = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "4",
           "--lora-alpha", "8", "--lora-modules-to-save", "word_embeddings"]
PLAIN = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--group-query-attention",
         "--num-query-groups", "2", "--ffn-hidden-size", "32", "--seq-length", "16", "--max-position-embeddings",
         "16", "--vocab-size", "8", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
         "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "3", "--optimizer", "adam",
         "--lr", "0.01", "--clip-grad", "1.0", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3",
         "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
         "--hidden-dropout", "0", "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1",
         "--init-method-std", "0.3", "--position-embedding-type", "rope"]
FSDP2, FSDP1 = ["--use-torch-fsdp2"], ["--use-torch-fsdp"]
TP2_SP = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
HSDP = ["--hsdp-replicate-size", "2"]  # 2 replicas of 1 shard: HSDP's 2-D mesh (FSDP1: HYBRID_SHARD)
RTOL, ATOL = 1e-5, 1e-5


def _lora(base: str) -> List[str]:
    return PLAIN + TARGETS + ["--load", base, "--finetune"]


def _adapters_only(argv: List[str]) -> List[str]:
    """Without --lora-modules-to-save (bf16 word embeddings would reduce their gradient in another order)."""
    flag = argv.index("--lora-modules-to-save")
    return argv[:flag] + argv[flag + 2:]


def _adapters_and_base(trainer) -> Dict[str, Dict[str, torch.Tensor]]:
    """The full (DP-unsharded) trainable and frozen tensors on DP rank 0 ({} elsewhere); collective."""
    from mindspeed_llm.transforms.lora import trainable_shapes

    full = trainer.dp.model_state()["model"]
    trained = trainable_shapes(trainer.model)
    return {"adapters": {k: v.clone() for k, v in full.items() if k in trained},
            "base": {k: v.clone() for k, v in full.items() if k not in trained}}


def _watch_dtypes(trainer, seen: Dict[str, str]) -> None:
    """Record the dtypes a LoRA linear's weight, adapter and output have inside the forward."""
    qkv = trainer.model.decoder.layers["0"].self_attention.linear_qkv

    def hook(module, inputs, output) -> None:
        seen.update(base=str(module.weight.dtype), adapter=str(module.lora_A.weight.dtype), output=str(output.dtype))

    qkv.register_forward_hook(hook)


def _run(argv: List[str], steps: int, save_after: Optional[int] = None, save: Optional[str] = None,
         watch_dtypes: bool = False) -> Dict[str, object]:
    """Losses and grad norms of ``steps`` steps (saving after step ``save_after``); the tensors after them."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + (["--save", save] if save else []))
    iterator = trainer.train_iterator()
    result: Dict[str, object] = {"losses": [], "grad_norms": [], "start": trainer.iteration, "dtypes": {}}
    if watch_dtypes:
        _watch_dtypes(trainer, result["dtypes"])
    for step in range(1, steps + 1):
        outcome = trainer.train_step(iterator)
        result["losses"].append(outcome.loss)
        result["grad_norms"].append(outcome.grad_norm)
        if step == save_after:
            trainer.save()
    result.update(_adapters_and_base(trainer))
    result["moment_dtypes"] = sorted({str(s["exp_avg"].dtype) for s in trainer.optimizer.optimizer.state.values()})
    result["optimizer_states"] = len(trainer.optimizer.optimizer.state)  # parameters with Adam moments
    return result


def _saved_keys(directory: str, iteration: int) -> List[str]:
    from core import checkpointing

    path = os.path.join(directory, f"iter_{iteration:07d}", "mp_rank_00", checkpointing.CHECKPOINT_FILENAME)
    return sorted(checkpointing.load_file(path)["model"])


def _worker(rank: int, world: int, tmp: str) -> Optional[Dict[str, object]]:
    base, ddp_saved = os.path.join(tmp, "base"), os.path.join(tmp, "ddp_adapters")
    fsdp_saved = os.path.join(tmp, "fsdp2_adapters")
    results = {"fsdp2": _run(_lora(base) + FSDP2, 3), "fsdp1": _run(_lora(base) + FSDP1, 3),
               "hsdp": _run(_lora(base) + FSDP2 + HSDP, 3), "hsdp_fsdp1": _run(_lora(base) + FSDP1 + HSDP, 3)}
    results["fsdp2_saving"] = _run(_lora(base) + FSDP2, 1, save_after=1, save=fsdp_saved)
    resume = [flag for flag in _lora(base) if flag != "--finetune"]  # --finetune would restart from iteration 0
    results["fsdp2_resumed"] = _run(resume + FSDP2 + ["--lora-load", fsdp_saved], 2)
    results["ddp_from_fsdp2"] = _run(resume + ["--lora-load", fsdp_saved], 2)
    results["fsdp2_from_ddp"] = _run(resume + FSDP2 + ["--lora-load", ddp_saved], 2)
    results["fsdp2_keys"] = _saved_keys(fsdp_saved, 1) if rank == 0 else None
    results["fsdp2_tp2_sp"] = _run(PLAIN + TARGETS + FSDP2 + TP2_SP, 3)  # DP 1: the TP sums of adapter grads
    results["fsdp2_bf16"] = _run(_adapters_only(_lora(base)) + FSDP2 + ["--bf16"], 3, watch_dtypes=True)
    return results if rank == 0 else None


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, object]:
    tmp = str(tmp_path_factory.mktemp("lora_fsdp"))
    base, ddp_saved = os.path.join(tmp, "base"), os.path.join(tmp, "ddp_adapters")
    _run(PLAIN + ["--train-iters", "1"], 1, save_after=1, save=base)  # a trained base, not the initialisation
    results = {"reference": _run(_lora(base), 3, save_after=1, save=ddp_saved), "ddp_keys": _saved_keys(ddp_saved, 1),
               "initialised": _run(PLAIN + TARGETS, 3),  # no base checkpoint: TP 2 needs none
               "bf16": _run(_adapters_only(_lora(base)) + ["--bf16"], 3)}
    results.update(run_distributed(2, _worker, tmp)[0])
    from core import checkpointing

    path = os.path.join(base, "iter_0000001", "mp_rank_00", checkpointing.CHECKPOINT_FILENAME)
    results["base"] = checkpointing.load_file(path)["model"]
    return results


def _same_steps(actual: Dict[str, object], reference: Dict[str, object], first: int) -> None:
    count = len(actual["losses"])
    for key in ("losses", "grad_norms"):
        torch.testing.assert_close(torch.tensor(actual[key]), torch.tensor(reference[key][first:first + count]),
                                   rtol=RTOL, atol=0, msg=lambda m: f"{key}: {m}")


def _same_adapters(actual: Dict[str, torch.Tensor], reference: Dict[str, torch.Tensor]) -> None:
    assert set(actual) == set(reference)
    for name, value in actual.items():
        torch.testing.assert_close(value, reference[name], rtol=0, atol=ATOL, msg=lambda m: f"{name}: {m}")


def test_the_reference_trains_every_adapter_and_freezes_the_base(runs):
    reference = runs["reference"]
    assert len(reference["adapters"]) == 17  # 8 factors per layer and the word embeddings
    assert any(".lora_B." in name for name in reference["adapters"])
    for name, value in reference["adapters"].items():
        if ".lora_B." in name:  # B starts at zero: Adam moved it by ~lr per step
            assert value.abs().max() > 100 * ATOL, name
    for name, value in reference["base"].items():
        assert torch.equal(value, runs["base"][name]), name


@pytest.mark.parametrize("name", ["fsdp2", "fsdp1", "hsdp", "hsdp_fsdp1"])
def test_lora_under_fsdp_equals_one_process(runs, name):
    _same_steps(runs[name], runs["reference"], 0)
    _same_adapters(runs[name]["adapters"], runs["reference"]["adapters"])
    assert runs[name]["optimizer_states"] == len(runs["reference"]["adapters"])  # none for the frozen base
    base = runs[name]["base"]
    assert set(base) == set(runs["base"]) - set(runs[name]["adapters"])
    for key, value in base.items():
        assert torch.equal(value, runs["base"][key]), f"{name}: base weight {key} changed"


def test_lora_under_fsdp2_with_tp2_and_sequence_parallel_equals_one_process(runs):
    _same_steps(runs["fsdp2_tp2_sp"], runs["initialised"], 0)


def test_under_fsdp2_with_bf16_the_adapters_stay_fp32(runs):
    """FSDP2's bf16 param_dtype reaches the base weights only: the adapters gather, compute, reduce and step in
    fp32 (their own unit), as under DDP: the losses and grad norms are the DDP bf16 run's."""
    run = runs["fsdp2_bf16"]
    assert run["dtypes"] == {"base": "torch.bfloat16", "adapter": "torch.float32", "output": "torch.bfloat16"}
    assert run["moment_dtypes"] == ["torch.float32"]
    assert all(v.dtype == torch.float32 for v in run["adapters"].values())
    _same_steps(run, runs["bf16"], 0)
    _same_adapters(run["adapters"], runs["bf16"]["adapters"])
    for key, value in run["base"].items():
        assert torch.equal(value, runs["base"][key]), f"base weight {key} changed"


def test_an_fsdp2_adapter_checkpoint_holds_the_ddp_keys(runs):
    assert runs["fsdp2_keys"] == runs["ddp_keys"] == sorted(runs["reference"]["adapters"])


@pytest.mark.parametrize("name", ["fsdp2_resumed", "ddp_from_fsdp2", "fsdp2_from_ddp"])
def test_an_adapter_checkpoint_resumes_across_fsdp_and_ddp(runs, name):
    assert runs[name]["start"] == 1
    _same_steps(runs[name], runs["reference"], 1)
    _same_adapters(runs[name]["adapters"], runs["reference"]["adapters"])
