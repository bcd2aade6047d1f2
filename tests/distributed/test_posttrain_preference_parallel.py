"""DPO, SimPO and the reward model in parallel layouts equal one process: losses, grad norms and every
logged statistic of two training steps, fp32, 1e-5 relative.

One 2-process launch runs: DPO at TP 2 (with and without SP), PP 2 (the frozen reference's rows riding
beside the policy's between stages), PP 2 with virtual stages, PP 2 under the zero-bubble schedule, PP 2 with precomputed reference log-probs,
CP 2 (sequence sums all-reduced over CP; also precomputed), DP 2 with the distributed optimizer, FSDP2
and FSDP1 (the reference a whole copy gathered from the shards); SimPO at PP 2, CP 2 and FSDP2; the reward
model at TP 2 with SP (scores gathered over TP), PP 2 and FSDP2; and DPO at TP 2 against ``--ref-model``, a
TP-2 checkpoint of the initial model; DPO with LoRA (the reference: the base, adapters off) at TP 2 with SP,
PP 2 and under FSDP2 (DP 2), and with QLoRA at PP 2; DPO's validation (``--split``, every statistic after the
two steps) at PP 2 with the frozen reference and with precomputed log-probs, and at DP 2.

    python -m pytest -q tests/distributed/test_posttrain_preference_parallel.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from core.launcher import run_distributed
from tests.unit.test_posttrain_preference import ARGV, pairwise_dataset

TOLERANCE = 1e-5
BASE = ARGV + ["--distributed-backend", "gloo", "--optimizer", "adam", "--lr", "0.01", "--global-batch-size", "4"]
TP2, PP2, CP2 = (["--tensor-model-parallel-size", "2"], ["--pipeline-model-parallel-size", "2"],
                 ["--context-parallel-size", "2"])
LORA = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "4"]
# reference name -> the stage and its flags (run in one process)
MODELS: Dict[str, List[str]] = {
    "dpo": ["--stage", "dpo", "--pref-ftx", "0.3"],
    "dpo_four_layers": ["--stage", "dpo", "--num-layers", "4"],
    "simpo": ["--stage", "simpo"],
    "orm": ["--stage", "orm"],
    "dpo_lora": ["--stage", "dpo", *LORA],
    "dpo_qlora": ["--stage", "dpo", *LORA, "--qlora"],
    "dpo_validated": ["--stage", "dpo", "--split", "75,25,0", "--eval-iters", "1"],
}
# layout name -> (reference, flags at 2 processes)
LAYOUTS: Dict[str, Tuple[str, List[str]]] = {
    "dpo_tp2": ("dpo", TP2),
    "dpo_tp2_sp": ("dpo", TP2 + ["--sequence-parallel"]),
    "dpo_pp2": ("dpo", PP2),
    "dpo_pp2_vpp": ("dpo_four_layers", PP2 + ["--num-layers-per-virtual-pipeline-stage", "1"]),
    "dpo_pp2_precomputed": ("dpo", PP2 + ["--precompute-ref-log-probs"]),
    "dpo_pp2_zero_bubble": ("dpo", PP2 + ["--schedules-method", "zero-bubble"]),
    "dpo_cp2": ("dpo", CP2),
    "dpo_dp2_distributed_optimizer": ("dpo", ["--use-distributed-optimizer"]),
    "dpo_cp2_precomputed": ("dpo", CP2 + ["--precompute-ref-log-probs"]),
    "dpo_fsdp2": ("dpo", ["--use-torch-fsdp2"]),
    "dpo_fsdp1": ("dpo", ["--use-torch-fsdp"]),
    "simpo_fsdp2": ("simpo", ["--use-torch-fsdp2"]),
    "orm_fsdp2": ("orm", ["--use-torch-fsdp2"]),
    "simpo_pp2": ("simpo", PP2),
    "simpo_cp2": ("simpo", CP2),
    "orm_tp2_sp": ("orm", TP2 + ["--sequence-parallel"]),
    "orm_pp2": ("orm", PP2),
    "dpo_lora_tp2_sp": ("dpo_lora", TP2 + ["--sequence-parallel"]),
    "dpo_lora_pp2": ("dpo_lora", PP2),
    "dpo_lora_fsdp2": ("dpo_lora", ["--use-torch-fsdp2"]),  # adapters off under FSDP2: their unit never gathers
    "dpo_qlora_pp2": ("dpo_qlora", PP2),  # PP does not split a weight: each layer's NF4 bytes are one process's
    "dpo_validated_pp2": ("dpo_validated", PP2),
    "dpo_validated_pp2_precomputed": ("dpo_validated", PP2 + ["--precompute-ref-log-probs"]),
    "dpo_validated_dp2": ("dpo_validated", []),
}


def _steps(argv: List[str]) -> List[Dict[str, float]]:
    from mindspeed_llm.posttrain import STAGES
    from mindspeed_llm.training.training import setup

    trainer = setup(argv, STAGES[argv[argv.index("--stage") + 1]])
    iterator = trainer.train_iterator()
    figures = []
    for _ in range(2):
        result = trainer.train_step(iterator)
        figures.append({**result.stats, "grad_norm": result.grad_norm})
    if "--split" in argv:  # then the validation split's statistics
        figures.append(trainer.evaluate())
    return figures


def _with_saved_reference(argv: List[str], directory: str) -> List[Dict[str, float]]:
    """The initial model saved at this layout, then DPO against it as ``--ref-model`` (loaded per TP rank)."""
    from mindspeed_llm.posttrain import DPOTask
    from mindspeed_llm.training.training import setup

    initial = setup(argv + ["--save", directory], DPOTask)
    initial.save()
    return _steps(argv + ["--ref-model", directory])


def _worker(rank: int, world: int, jobs: Dict[str, List[str]], ref_job: Tuple[List[str], str]
            ) -> Dict[str, List[Dict[str, float]]]:
    results = {name: _steps(argv) for name, argv in jobs.items()}
    results["dpo_tp2_ref_model"] = _with_saved_reference(*ref_job)
    return results


DPO_BETA = 0.1  # --dpo-beta's default: a reward is beta x (policy - reference log-prob)


def _scale(step: Dict[str, float], key: str) -> float:
    """What ``step[key]``'s rounding is relative to. A reward is a small difference of two log-probs of
    about ``logps/*``'s size, so its fp32 rounding follows theirs times beta, not its own size (seen: a
    rejected reward of -0.0072 off by 1e-7 between layouts on an AVX512 Xeon, log-probs -16.7)."""
    scale = max(abs(step[key]), 1e-3)
    if key.startswith("rewards/"):
        scale = max([scale] + [DPO_BETA * abs(value) for name, value in step.items() if name.startswith("logps/")])
    return scale


def _close(ours: List[Dict[str, float]], theirs: List[Dict[str, float]]) -> bool:
    return all(abs(a[key] - b[key]) <= TOLERANCE * _scale(b, key) for a, b in zip(ours, theirs) for key in b)


def test_preference_stages_in_parallel_layouts_equal_one_process(tmp_path) -> None:
    prefix, _ = pairwise_dataset(tmp_path, count=12)
    base = BASE + ["--data-path", prefix]
    references = {name: _steps(base + flags) for name, flags in MODELS.items()}
    assert references["dpo_lora"][1]["rewards/margins"] != 0 != references["dpo_qlora"][1]["rewards/margins"]
    assert references["dpo"][1]["rewards/margins"] != 0
    orm = references["orm"]  # the reward model learns in its two steps: the layouts match moving figures
    assert orm[1]["lm loss"] < orm[0]["lm loss"] and orm[1]["accuracy"] > orm[0]["accuracy"]
    assert len(references["dpo_validated"]) == 3 and references["dpo_validated"][2]["rewards/margins"] != 0
    jobs = {name: base + MODELS[model] + flags for name, (model, flags) in LAYOUTS.items()}
    per_rank = run_distributed(2, _worker, jobs, (base + MODELS["dpo"] + TP2, str(tmp_path / "initial_tp2")))
    expected = {name: references[model] for name, (model, _) in LAYOUTS.items()}
    expected["dpo_tp2_ref_model"] = references["dpo"]
    wrong = {name: (steps, expected[name]) for name, steps in per_rank[-1].items() if not _close(steps, expected[name])}
    assert not wrong, f"{sorted(wrong)} differ from one process: {wrong}"
