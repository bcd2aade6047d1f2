"""The README's main job, run as a user runs it: examples/quickstart.sh (shrunk to fewer iterations).

Corpus from the standard library's docstrings, a trained tokenizer,
preprocess_data.py, TP=2 pretraining under torchrun on the CPU, conversion
to Hugging Face format and a sample from transformers. The loss must fall
well below its first logged value, and the script itself fails when the
validation loss is above MAX_VALID_LOSS (set here for the shorter run).
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# the validation loss after 150 of the quick start's 300 iterations (measured: 5.90), with a margin
MAX_VALID_LOSS_150 = "6.0"


def assert_reads_like_words(sample: str) -> None:
    """Most of the sample's whitespace-separated pieces are plain words (noise is digits, dots and quotes)."""
    assert sample.startswith("Return the"), sample
    pieces = sample.split()
    words = [piece for piece in pieces if re.fullmatch(r"[A-Za-z]+[.,:;]?", piece)]
    assert len(words) >= 0.7 * len(pieces), sample


@pytest.mark.slow
def test_quickstart_prepares_trains_converts_and_generates(tmp_path: Path) -> None:
    env = dict(os.environ, OUT=str(tmp_path / "qs"), TRAIN_ITERS="150", MAX_VALID_LOSS=MAX_VALID_LOSS_150)
    run = subprocess.run(["bash", "examples/quickstart.sh"], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = r"first logged loss ([\d.]+), last logged loss ([\d.]+), validation loss ([\d.]+)"
    first, last, valid = map(float, re.search(summary, run.stdout).groups())
    assert last < 0.75 * first
    assert valid <= float(MAX_VALID_LOSS_150)
    sample = re.search(r"^sample: (.+)$", run.stdout, re.M).group(1)
    assert_reads_like_words(ast.literal_eval(sample))
    out = tmp_path / "qs"
    assert (out / "data" / "stdlib_text_document.idx").is_file()
    assert (out / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "150"
    assert (out / "hf" / "config.json").is_file() and (out / "hf" / "tokenizer.json").is_file()
