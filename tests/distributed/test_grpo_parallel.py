"""GRPO in parallel layouts equals one process: the same rollouts (every completion's ids), rewards,
losses, grad norms and logged statistics over three steps, fp32, 1e-5 relative.

One 2-process launch runs TP 2, PP 2 (generation passes activations stage to stage; the forward-only passes
for the kept log-probs run the pipeline schedule) and DP 2 with the distributed optimizer (each rank rolls
out half of the prompts; rewards, their statistics and DAPO's token count are reduced over DP), each with
plain GRPO and with ``--num-iterations 2 --kl-coef 0.1 --loss-type dapo --clip-ratio-high 0.28``.

    python -m pytest -q tests/distributed/test_grpo_parallel.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from core.launcher import run_distributed
from tests.unit.test_grpo_stage import ARGV, prompt_dataset

TOLERANCE = 1e-5
STEPS = 4
BASE = ARGV + ["--distributed-backend", "gloo", "--train-iters", str(STEPS)]
FULL = ["--num-iterations", "2", "--kl-coef", "0.1", "--loss-type", "dapo", "--clip-ratio-high", "0.28"]
MODELS: Dict[str, List[str]] = {"grpo": [], "full": FULL}
LAYOUTS: Dict[str, Tuple[str, List[str]]] = {
    f"{model}_{layout}": (model, MODELS[model] + flags)
    for model in MODELS
    for layout, flags in (("tp2", ["--tensor-model-parallel-size", "2"]),
                          ("pp2", ["--pipeline-model-parallel-size", "2"]),
                          ("dp2", ["--use-distributed-optimizer"]))}

Run = Tuple[List[Dict[str, float]], List[List[int]]]


def _steps(argv: List[str]) -> Run:
    """Every step's statistics and grad norm, and every rollout's completions (in global prompt order)."""
    import torch.distributed as dist

    from mindspeed_llm.posttrain import GRPOTask
    from mindspeed_llm.training.training import setup

    trainer = setup(argv, GRPOTask)
    iterator = trainer.train_iterator()
    figures, completions = [], []
    for _ in range(STEPS):
        result = trainer.train_step(iterator)
        figures.append({**result.stats, "grad_norm": result.grad_norm})
        if trainer.iteration % 2 == 1 or "--num-iterations" not in argv:
            ours = trainer.task.last_rollout["completions"]
            if trainer.state.dp > 1:  # rank r holds prompts [r * n, (r + 1) * n) of each global batch
                gathered = [None] * trainer.state.dp
                dist.all_gather_object(gathered, ours, group=trainer.state.dp_group.handle)
                ours = [row for part in gathered for row in part]
            completions.append(ours)
    return figures, completions


def _worker(rank: int, world: int, jobs: Dict[str, List[str]]) -> Dict[str, Run]:
    return {name: _steps(argv) for name, argv in jobs.items()}


def _close(ours: List[Dict[str, float]], theirs: List[Dict[str, float]]) -> bool:
    return all(abs(a[key] - b[key]) <= TOLERANCE * max(abs(b[key]), 1e-3) for a, b in zip(ours, theirs)
               for key in b if key != "rollout tokens per second")


def test_grpo_in_parallel_layouts_equals_one_process(tmp_path) -> None:
    base = BASE + ["--data-path", prompt_dataset(tmp_path)]
    references = {name: _steps(base + flags) for name, flags in MODELS.items()}
    assert references["full"][0][1]["kl"] > 0 and references["grpo"][0][1]["grad_norm"] > 0
    jobs = {name: base + flags for name, (_, flags) in LAYOUTS.items()}
    per_rank = run_distributed(2, _worker, jobs)
    for name, (model, _) in LAYOUTS.items():
        figures, completions = per_rank[-1][name]
        expected_figures, expected_completions = references[model]
        assert completions == expected_completions, f"{name}: the rollouts differ from one process"
        assert _close(figures, expected_figures), f"{name} differs from one process: {figures} vs {expected_figures}"
