"""Tensor-parallel LoRA equals one process: losses, grad norms and every adapter gradient.

LoRA r=4 on linear_qkv, linear_proj, linear_fc1 and linear_fc2 of a GQA (4 heads, 2 KV groups) SwiGLU
model with the (tied) word embeddings trained beside them (--lora-modules-to-save), three SGD steps (the adapters' B starts at zero, so A's gradients appear from step 2 on). One
4-process launch runs TP 2 x DP 2 with sequence parallelism, TP 4 (the KV heads replicated: B's K/V rows
are replicas), TP 2 x PP 2 (also zero-bubble: the adapters' weight gradients deferred; and with two virtual
stages per rank on a 4-layer model; and Zamba's 'Z' layers, LoRA inside the shared block that both stages hold),
CP 2 x TP 2 with SP and CP 2 x DP 2 (ring attention), and TP 2 x DP 2
with the distributed optimizer and --bf16 base weights (losses only, loosely), and a TP 2 x DP 2 SP run with
Adam under the distributed optimizer that saves its adapters after step 1 and resumes them with --lora-load (one
file per TP rank, the optimizer state sharded over DP); each is compared with one process. The full adapter gradients (the ranks' pieces unsharded by their TP shard spec) of the last step
must equal one process's.

    python -m pytest -q tests/distributed/test_lora.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch

from core.launcher import run_distributed

TOLERANCE = 1e-5
GRAD_TOLERANCE = 5e-5  # of the largest element: three SGD steps at lr 0.5 amplify fp32 summation order
ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--group-query-attention",
        "--num-query-groups", "2", "--ffn-hidden-size", "32", "--seq-length", "16", "--max-position-embeddings",
        "16", "--vocab-size", "8", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "3", "--optimizer", "sgd",
        "--lr", "0.5", "--clip-grad", "0", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3",
        "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
        "--hidden-dropout", "0", "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1",
        "--init-method-std", "0.3", "--position-embedding-type", "rope",
        "--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "4",
        "--lora-alpha", "8", "--lora-modules-to-save", "word_embeddings"]
TP = "--tensor-model-parallel-size"
LAYOUTS: Dict[str, List[str]] = {
    "tp2_sp": [TP, "2", "--sequence-parallel"],
    "tp4_kv_replicated": [TP, "4"],
    "tp2_pp2": [TP, "2", "--pipeline-model-parallel-size", "2"],
    "tp2_pp2_zero_bubble": [TP, "2", "--pipeline-model-parallel-size", "2", "--schedules-method", "zero-bubble"],
    "cp2_tp2_sp": [TP, "2", "--sequence-parallel", "--context-parallel-size", "2"],
    "cp2_dp2": ["--context-parallel-size", "2"],
}
# interleaved stages need two layers per pipeline stage; at lr 0.5 four layers amplify the fp32 summation order
# of any TP 2 x PP 2 run (with or without VPP) to 1e-4 of the largest gradient in three steps, hence lr 0.1
DEEP = ["--num-layers", "4", "--lr", "0.1"]
DEEP_LAYOUTS: Dict[str, List[str]] = {
    "tp2_pp2_vpp2": [TP, "2", "--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"],
}
# Zamba's 'Z' layers: LoRA on the shared block's linears (one block run by both 'Z' layers, held by both stages
# at PP 2, its adapters' gradients summed over the copies), lr 0.1 as the deeper model above
ZAMBA = ["--num-layers", "4", "--lr", "0.1", "--hybrid-override-pattern", "ZMZM", "--mamba-head-dim", "8",
         "--mamba-num-groups", "1", "--mamba-state-dim", "4", "--mamba-chunk-size", "3",
         "--shared-block-adapter-rank", "2", "--shared-block-attention-adapters", "--init-method-std", "0.1"]
ZAMBA_LAYOUTS: Dict[str, List[str]] = {"zamba_tp2_pp2": [TP, "2", "--pipeline-model-parallel-size", "2"]}
ADAM = ["--optimizer", "adam", "--lr", "0.01"]  # its moments are sharded over DP and checkpointed
BF16 = ["--bf16", "--use-distributed-optimizer"]  # DP 2: the adapters' optimizer state sharded over DP
Steps = List[Dict[str, float]]


def _run(argv: List[str], gradients: bool = True) -> Tuple[Steps, Dict[str, torch.Tensor]]:
    """Three steps: per step the loss and grad norm; the full adapter gradients of the last step."""
    from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    steps = []
    for _ in range(3):
        result = trainer.train_step(iterator)
        steps.append({"lm loss": result.loss, "grad_norm": result.grad_norm})
    grads = {}
    if gradients:
        for model in trainer.models:
            for name, param in model.named_parameters():
                if param.requires_grad:
                    grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard,
                                                     trainer.state.tp_group)
    return steps, grads


def _resumed(argv: List[str], directory: str) -> Tuple[Steps, Dict[str, torch.Tensor]]:
    """Step 1, save the adapters; a new trainer with --lora-load takes steps 2 and 3."""
    from mindspeed_llm.training.training import setup

    first = setup(argv + ["--save", directory])
    result = first.train_step(first.train_iterator())
    first.save()
    second = setup(argv + ["--lora-load", directory])
    iterator = second.train_iterator()
    steps = [result] + [second.train_step(iterator) for _ in range(2)]
    return [{"lm loss": r.loss, "grad_norm": r.grad_norm} for r in steps], {}


def _worker(rank: int, world: int, directory: str) -> Dict[str, tuple]:
    results = {name: _run(ARGV + flags) for name, flags in LAYOUTS.items()}
    results.update({name: _run(ARGV + DEEP + flags) for name, flags in DEEP_LAYOUTS.items()})
    results.update({name: _run(ARGV + ZAMBA + flags) for name, flags in ZAMBA_LAYOUTS.items()})
    results["tp2_dp2_bf16_distributed_optimizer"] = _run(ARGV + [TP, "2"] + BF16, gradients=False)
    results["resume_tp2_sp_distributed_optimizer"] = _resumed(
        ARGV + ADAM + LAYOUTS["tp2_sp"] + ["--use-distributed-optimizer"], directory)
    return results


def _relative(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    """The largest difference relative to the largest element (fp32 sums in another order)."""
    return float((ours - theirs).abs().max() / theirs.abs().max())


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(b), 1e-6)


def test_lora_at_tp_2_and_4_equals_one_process(tmp_path) -> None:
    ref_steps, ref_grads = _run(ARGV)
    assert ref_grads and all(g.abs().max() > 0 for g in ref_grads.values())  # step 3: A and B both learn
    references = {name: (ref_steps, ref_grads) for name in LAYOUTS}
    references.update(dict.fromkeys(DEEP_LAYOUTS, _run(ARGV + DEEP)))
    references.update(dict.fromkeys(ZAMBA_LAYOUTS, _run(ARGV + ZAMBA)))
    bf16_steps, _ = _run(ARGV + ["--bf16"], gradients=False)
    adam_steps, _ = _run(ARGV + ADAM, gradients=False)
    per_rank = run_distributed(4, _worker, str(tmp_path / "adapters"))
    # every rank's gradients are full tensors; the last rank holds the loss (and the last PP stage's layers)
    wrong = []
    for name, (expected_steps, expected_grads) in references.items():
        steps, grads = per_rank[-1][name]
        wrong += [f"{name} step {i} {key}: {ours[key]} vs {theirs[key]}" for i, (ours, theirs)
                  in enumerate(zip(steps, expected_steps)) for key in theirs if not _close(ours[key], theirs[key],
                                                                                      TOLERANCE)]
        stage_grads = {n: g for rank in per_rank for n, g in rank[name][1].items()}  # PP: both stages
        assert set(expected_grads) <= set(stage_grads), name  # PP: plus the last stage's tied copy of the embeddings
        wrong += [f"{name} {n}: max diff {_relative(g, expected_grads[n]):.2e} of the largest" for n, g in
                  stage_grads.items() if n in expected_grads and _relative(g, expected_grads[n]) > GRAD_TOLERANCE]
        if "output_layer.weight" in stage_grads:  # the tied copy trains with the word embeddings
            copy = stage_grads["output_layer.weight"]
            wrong += [] if _relative(copy, expected_grads["embedding.word_embeddings.weight"]) <= GRAD_TOLERANCE else [
                f"{name}: the last stage's tied embedding copy has another gradient"]
    resumed, _ = per_rank[-1]["resume_tp2_sp_distributed_optimizer"]
    wrong += [f"resumed step {i} {key}: {ours[key]} vs {theirs[key]}" for i, (ours, theirs)
              in enumerate(zip(resumed, adam_steps)) for key in theirs if not _close(ours[key], theirs[key], TOLERANCE)]
    bf16, _ = per_rank[-1]["tp2_dp2_bf16_distributed_optimizer"]
    wrong += [f"bf16 step {i}: {a['lm loss']} vs {b['lm loss']}" for i, (a, b) in enumerate(zip(bf16, bf16_steps))
              if not _close(a["lm loss"], b["lm loss"], 2e-2)]
    assert not wrong, "\n".join(wrong)
