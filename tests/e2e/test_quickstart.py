"""The README's main job, run as a user runs it: examples/quickstart.sh.

Trains a tiny Llama with torchrun on 2 CPU processes (TP=2), converts the
checkpoint to Hugging Face format and generates with transformers. The loss
must fall by more than half and the generated tokens must continue the
arithmetic progression of the prompt.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_trains_converts_and_generates(tmp_path: Path) -> None:
    env = dict(os.environ, OUT=str(tmp_path / "qs"), TRAIN_ITERS="120")
    run = subprocess.run(["bash", "examples/quickstart.sh"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    first, last = map(float, re.search(r"first logged loss ([\d.]+), last logged loss ([\d.]+)", run.stdout).groups())
    assert last < 0.5 * first
    generated, expected = re.search(r"generated (\[.*?\]) \(expected (\[.*?\])\)", run.stdout).groups()
    assert generated == expected
    assert (tmp_path / "qs" / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "120"
    assert (tmp_path / "qs" / "hf" / "config.json").is_file()
