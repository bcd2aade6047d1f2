"""The README's main job, run as a user runs it: examples/quickstart.sh (shrunk to fewer iterations).

Corpus from the standard library's docstrings, a trained tokenizer,
preprocess_data.py, TP=2 pretraining under torchrun on the CPU, conversion
to Hugging Face format and a sample from transformers. The loss must fall
well below its first logged value.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quickstart_prepares_trains_converts_and_generates(tmp_path: Path) -> None:
    env = dict(os.environ, OUT=str(tmp_path / "qs"), TRAIN_ITERS="150")
    run = subprocess.run(["bash", "examples/quickstart.sh"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    first, last = map(float, re.search(r"first logged loss ([\d.]+), last logged loss ([\d.]+)", run.stdout).groups())
    assert last < 0.75 * first
    assert re.search(r"^sample: '.+'", run.stdout, re.M)
    out = tmp_path / "qs"
    assert (out / "data" / "stdlib_text_document.idx").is_file()
    assert (out / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "150"
    assert (out / "hf" / "config.json").is_file() and (out / "hf" / "tokenizer.json").is_file()
