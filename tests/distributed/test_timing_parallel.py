"""``--timing-log-level 2`` across the ranks of a 2-stage pipeline: the last rank prints every
region as (min, max) over both ranks, the pipeline exchanges included, and the regions fit in the step.

    python -m pytest -q tests/distributed/test_timing_parallel.py
"""
from __future__ import annotations

import contextlib
import io
import re

from core.launcher import run_distributed
from tests.unit.test_timing_and_profile import ARGV

BLOCK = re.compile(r"^    ([a-z0-9-]+) \.+: \(([0-9.]+), ([0-9.]+)\)$", re.MULTILINE)


def _worker(rank: int, world: int) -> str:
    from mindspeed_llm.training.training import setup, train

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train(setup(ARGV + ["--pipeline-model-parallel-size", "2", "--distributed-backend", "gloo",
                            "--timing-log-level", "2", "--timing-log-option", "minmax"]))
    return out.getvalue()


def test_pipeline_ranks_report_every_region() -> None:
    outputs = run_distributed(2, _worker)
    assert "time across ranks" not in outputs[0]  # the last rank prints, as the iteration line
    regions = {name: (float(low), float(high)) for name, low, high in BLOCK.findall(outputs[1])}
    assert set(regions) == {"forward-backward", "forward-compute", "backward-compute", "batch-generator",
                            "grads-reduce", "optimizer", "pipeline-p2p", "rollout"}
    assert regions["pipeline-p2p"][1] > 0 and regions["rollout"] == (0.0, 0.0)
    assert all(low <= high for low, high in regions.values())
    assert regions["forward-compute"][0] + regions["backward-compute"][0] <= 1.05 * regions["forward-backward"][1]
