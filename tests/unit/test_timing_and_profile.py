"""``--timing-log-level`` / ``--timing-log-option`` (Megatron's per-region timers) and ``--profile`` (a
torch.profiler trace of a step range).

* Level 1 prints, after each iteration line, forward-backward, forward and backward compute, the data,
  the gradient reduce and the optimizer in milliseconds per step; the compute regions fit inside
  forward-backward. Level 2 adds the pipeline exchanges and rollouts. The three options format alike.
* Without the flag no timers are installed (the hot path pays one global read).
* ``--profile`` writes a trace of exactly the requested steps that Perfetto / TensorBoard open.
* Bad ranges and the profile flags without ``--profile`` fail in one line.

    python -m pytest -q tests/unit/test_timing_and_profile.py
"""
from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import List

import pytest

from core import timers
from mindspeed_llm.training.metrics import format_timing, timing_regions
from mindspeed_llm.training.training import setup, train

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-3",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "5",
    "--device", "cpu", "--num-workers", "0", "--log-interval", "2", "--eval-iters", "0",
]
BLOCK = re.compile(r"^    ([a-z0-9-]+) \.+: \(([0-9.]+), ([0-9.]+)\)$", re.MULTILINE)


def test_level_one_prints_each_region_per_log_line(capsys: pytest.CaptureFixture) -> None:
    train(setup(ARGV + ["--timing-log-level", "1"]))
    out = capsys.readouterr().out
    assert out.count("(min, max) time across ranks (ms):") == 2  # after each of the two log lines
    regions = {}
    for name, low, high in BLOCK.findall(out):
        assert float(low) == float(high) >= 0.0  # one rank
        regions[name] = float(high)
    assert set(regions) == set(timing_regions(1))
    assert regions["forward-compute"] > 0 and regions["backward-compute"] > 0 and regions["optimizer"] > 0
    assert regions["forward-compute"] + regions["backward-compute"] <= 1.05 * regions["forward-backward"]


def test_no_timers_without_the_flag(capsys: pytest.CaptureFixture) -> None:
    trainer = setup(ARGV)
    assert timers.installed() is None and trainer.region_timers is None
    train(trainer)
    assert "time across ranks" not in capsys.readouterr().out


def test_timing_options_and_levels() -> None:
    per_rank: List[List[float]] = [[1.0, 2.0], [3.0, 0.5]]
    assert format_timing(["a", "b"], per_rank, "max").splitlines()[1:] == [
        f"    a {'.' * 47}: 3.00", f"    b {'.' * 47}: 2.00"]
    assert format_timing(["a", "b"], per_rank, "minmax").splitlines()[2].endswith(": (0.50, 2.00)")
    assert format_timing(["a", "b"], per_rank, "all").splitlines()[1].endswith(": (1.00, 3.00)")
    assert set(timing_regions(2)) == set(timing_regions(1)) | {"pipeline-p2p", "rollout"}


def test_timed_adds_up_only_when_installed() -> None:
    regions = timers.RegionTimers()
    timers.install(regions)
    try:
        with timers.timed("outer"):
            with timers.timed("inner"):
                sum(range(10000))
        taken = regions.take()
        assert taken["outer"] >= taken["inner"] > 0 and regions.take() == {}
    finally:
        timers.install(None)
    with timers.timed("ignored"):
        pass
    assert regions.take() == {}


def test_profile_writes_a_trace_of_the_requested_steps(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    directory = tmp_path / "trace"
    train(setup(ARGV + ["--profile", "--profile-step-start", "1", "--profile-step-end", "3",
                        "--profile-save-path", str(directory)]))
    files = glob.glob(str(directory / "rank0.*.pt.trace.json"))
    assert len(files) == 1
    events = json.loads(Path(files[0]).read_text())["traceEvents"]
    steps = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#0", "ProfilerStep#1"}  # the run's steps 1 and 2
    assert any("aten::mm" in str(e.get("name")) or "aten::addmm" in str(e.get("name")) for e in events)
    assert f"profile of steps [1, 3) written to {directory}" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--profile", "--profile-step-start", "3", "--profile-step-end", "3"], "need 0 <= start < end"),
    (["--profile", "--profile-step-start", "4", "--profile-step-end", "6"], "is not below --train-iters 4"),
    (["--profile", "--profile-step-start", "1", "--profile-ranks", "1"], "--profile-ranks 1 is not a rank"),
    (["--profile-step-start", "1"], "--profile-step-start has no effect without --profile"),
    (["--timing-log-option", "max"], "--timing-log-option has no effect without --timing-log-level"),
])
def test_bad_profile_and_timing_flags_fail_in_one_line(extra: List[str], message: str,
                                                       capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        setup(ARGV + extra)
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
