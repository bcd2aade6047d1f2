"""Every benchmark runs: ``python bench/<name>.py --smoke`` exits 0 and prints one JSON object.

One test per file of ``bench/*.py`` (a new bench is picked up without editing
this file), each run as a user would run it: a subprocess from the repository
root, with the package imported as installed (no ``sys.path`` edits). Its
stdout must be exactly one line, a JSON object; log lines belong on stderr.
``--smoke`` sizes each bench to a few seconds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES: List[Path] = sorted((ROOT / "bench").glob("*.py"))
TIMEOUT_S = 300


def test_benches_exist():
    assert len(BENCHES) >= 6, BENCHES


@pytest.mark.parametrize("bench", BENCHES, ids=lambda path: path.stem)
def test_bench_smoke_prints_one_json_line(bench: Path, tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": ""}  # the installed package, as a user has it
    done = subprocess.run([sys.executable, str(bench), "--smoke"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, f"{bench.name} --smoke exited {done.returncode}:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"{bench.name} printed {len(lines)} lines on stdout:\n{done.stdout[-3000:]}"
    record = json.loads(lines[0])
    assert isinstance(record, dict) and record, lines[0]
