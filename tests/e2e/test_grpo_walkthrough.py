"""examples/grpo.sh end to end on the CPU: SFT on addition records, then GRPO on 2 processes; the script
fails unless SFT's loss fell and GRPO's mean reward rose, and this test checks the rise itself from the log.

    python -m pytest -q tests/e2e/test_grpo_walkthrough.py
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def parse(lines):
    """examples/posttrain_metrics.py's parser of Megatron's iteration lines."""
    spec = importlib.util.spec_from_file_location("posttrain_metrics", REPO / "examples" / "posttrain_metrics.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.parse(lines)


def test_grpo_walkthrough_raises_the_mean_reward(tmp_path: Path) -> None:
    env = dict(os.environ, OUT=str(tmp_path / "grpo"))
    run = subprocess.run(["bash", "examples/grpo.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rows = parse((tmp_path / "grpo" / "grpo.log").read_text().splitlines())
    rewards = [row["reward mean"] for row in rows]
    assert len(rewards) == 16 and max(rewards[-4:]) > rewards[0] + 0.1, rewards
    assert "grpo: reward mean" in run.stdout
