"""Failures a user meets in a run, each ending with one line (the bad-input sweep included).

* An error escaping training is recorded per rank in ``--save/failures/rank_XXXXX.json`` (iteration, the
  rank's coordinates, host, pid, time, type, message, traceback) and rank 0 prints one summary line; the
  next run moves the files aside (``failures/old/``); without ``--save`` nothing is written.
* A full disk at a save: one line naming the file, "No space left on device" and the fix; no ``.tmp`` file
  left; the previous checkpoint and the tracker untouched. An unwritable ``--save`` is refused before
  training.
* Ctrl-C: one line naming the iteration and the last checkpoint, exit status 130, the save lock released,
  nothing saved.
* A tracker naming an iteration that is not there, and truncated checkpoint files: errors naming them.
"""
from __future__ import annotations

import builtins
import errno
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import torch

from core import checkpointing
from mindspeed_llm.training import failures, training
from mindspeed_llm.training.failures import RankPlace
from mindspeed_llm.training.pretrain_task import PretrainTask
from mindspeed_llm.training.save_lock import LOCK_FILENAME
from mindspeed_llm.training.training import run

REPO = Path(__file__).resolve().parents[2]
ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "4",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1",
]


def _error_lines(stderr: str) -> List[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def _stops(argv: List[str], capsys, code: int) -> str:
    """Run ``argv``, expect SystemExit(code) and exactly one ``error:`` line and no traceback; return it."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == code
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = _error_lines(err)
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def nan_from_step_3(monkeypatch):
    """Every loss from the third step on is NaN (a gradient NaN: the guard skips those steps)."""
    forward_step, calls = PretrainTask.forward_step, []

    def poisoned(self, batch, model):
        calls.append(1)
        loss, stats = forward_step(self, batch, model)
        return (loss * float("nan"), stats) if len(calls) > 2 else (loss, stats)

    monkeypatch.setattr(PretrainTask, "forward_step", poisoned)


# ------------------------------------------------------------------------------- failure records

def test_a_nan_stop_is_recorded_summarised_and_moved_aside_by_the_next_run(tmp_path, capsys, nan_from_step_3,
                                                                        monkeypatch) -> None:
    save = str(tmp_path / "ckpt")
    argv = ARGV + ["--train-iters", "6", "--max-skipped-iterations", "2", "--save", save]
    line = _stops(argv, capsys, 1)
    expected = ("error: rank 0 (tp 0 pp 0 dp 0) at iteration 4: 2 iterations in a row (to 4) had a non-finite "
                "loss or gradient norm")
    assert line.startswith(expected), line
    assert line.endswith(f"; details in {os.path.join(save, 'failures')}{os.sep}"), line
    path = os.path.join(save, "failures", "rank_00000.json")
    record = json.loads(Path(path).read_text())
    assert (record["rank"], record["world_size"], record["tp"], record["pp"], record["dp"]) == (0, 1, 0, 0, 0)
    assert record["iteration"] == 4 and record["type"] == "NonFiniteTraining" and record["pid"] == os.getpid()
    assert record["host"] and record["time"] and "_count_non_finite" in record["traceback"]
    assert not glob.glob(os.path.join(save, "failures", "*.tmp"))
    assert not os.path.exists(os.path.join(save, LOCK_FILENAME))

    monkeypatch.undo()  # the next run is healthy: its failures directory holds no file of the failed run
    assert run(ARGV + ["--save", save]).iteration == 4
    assert not os.path.exists(path)
    old = glob.glob(os.path.join(save, "failures", "old", "*", "rank_00000.json"))
    assert len(old) == 1 and json.loads(Path(old[0]).read_text())["type"] == "NonFiniteTraining"


def test_without_save_nothing_is_written_and_the_line_is_the_message(tmp_path, capsys, nan_from_step_3,
                                                                      monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = _stops(ARGV + ["--train-iters", "6", "--max-skipped-iterations", "2"], capsys, 1)
    assert line.startswith("error: 2 iterations in a row (to 4)"), line
    assert os.listdir(tmp_path) == []


def _record(rank: int, world: int, when: float, message: str = "boom", iteration: int = 12):
    place = RankPlace(rank, world, tp=rank % 2, pp=rank // 2)
    record = failures.failure_record(place, iteration, RuntimeError(message))
    record["unix_time"] = when
    return record


def test_the_summary_names_the_first_failure_or_every_rank_alike(tmp_path) -> None:
    save = str(tmp_path)
    first = failures.summary_line([_record(3, 4, 1.0, "disk gone"), _record(0, 4, 2.0, "peer closed")], save)
    assert first == (f"rank 3 (tp 1 pp 1 dp 0) at iteration 12: disk gone (1 other rank(s) failed after it); "
                     f"details in {os.path.join(save, 'failures')}{os.sep}")
    alike = failures.summary_line([_record(r, 4, 1.0 + r) for r in range(4)], save)
    assert alike.startswith("ranks 0-3 (all 4) at iteration 12: boom; details in ")
    # rank 0 reads what the other ranks wrote: rank 1 failed first, rank 0 later in a collective
    failures.record_failure(save, RankPlace(1, 2, tp=1), 7, ValueError("bad batch"))
    line = failures.report(save, RankPlace(0, 2), 7, RuntimeError("Connection closed by peer"))
    assert line.startswith("rank 1 (tp 1 pp 0 dp 0) at iteration 7: bad batch (1 other rank(s) failed after it)")
    assert sorted(os.listdir(os.path.join(save, "failures"))) == ["rank_00000.json", "rank_00001.json"]


def test_a_collective_timeout_is_recorded_and_one_line(tmp_path, capsys, monkeypatch) -> None:
    save, calls = str(tmp_path / "ckpt"), []
    all_reduce = training.all_reduce

    def times_out(*args, **kwargs):  # the step's first statistics all-reduce of iteration 2 never completes
        calls.append(1)
        if len(calls) == 3:
            raise torch.distributed.DistBackendError(
                "[/src/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 600000ms for recv operation")
        return all_reduce(*args, **kwargs)

    monkeypatch.setattr(training, "all_reduce", times_out)
    line = _stops(ARGV + ["--save", save], capsys, 1)
    assert line.startswith("error: rank 0 (tp 0 pp 0 dp 0) at iteration 2: Timed out waiting 600000ms for recv "
                           "operation; details in "), line
    record = json.loads(Path(save, "failures", "rank_00000.json").read_text())
    assert record["type"] == "DistBackendError" and "unbound_buffer.cc" in record["traceback"]
    try:  # a failure raised inside torch.distributed counts as a collective's, whatever its type
        torch.distributed.all_reduce(torch.ones(1))
    except Exception as error:
        assert failures.collective_failure(error)
    assert not failures.collective_failure(ValueError("a bug"))


# ------------------------------------------------------------------------------- a full disk

class _FullDisk:
    """A file whose writes fail with ENOSPC once they would pass ``room`` bytes (those before reach the disk)."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data):
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


def _disk_full_for(module, fragment: str, monkeypatch, room: int = 0) -> None:
    """``module``'s ``open`` of a path containing ``fragment`` for writing gives a file on a disk with ``room``
    bytes left."""
    def opener(path, mode="r", *args, **kwargs):
        handle = builtins.open(path, mode, *args, **kwargs)
        return _FullDisk(handle, room) if fragment in str(path) and "w" in mode else handle

    monkeypatch.setattr(module, "open", opener, raising=False)


@pytest.mark.parametrize("where", ["iter_0000004" + os.sep + "mp_rank_00", checkpointing.TRACKER_FILENAME])
def test_a_full_disk_at_a_save_is_one_line_and_leaves_the_previous_checkpoint(tmp_path, capsys, monkeypatch,
                                                                             where: str) -> None:
    save = str(tmp_path / "ckpt")
    if where == checkpointing.TRACKER_FILENAME:  # the first tracker write (iteration 2) works, the second fails
        real_write_tracker = checkpointing.write_tracker

        def write_tracker(root, iteration, release=False):
            if iteration == 4:
                _disk_full_for(checkpointing, where, monkeypatch)
            return real_write_tracker(root, iteration, release)

        monkeypatch.setattr(checkpointing, "write_tracker", write_tracker)
    else:  # torch.save's zip writer fails part-way through the file
        _disk_full_for(checkpointing, where, monkeypatch, room=4096)
    line = _stops(ARGV + ["--save", save, "--save-interval", "2"], capsys, 1)
    target = os.path.join(save, "iter_0000004", "mp_rank_00", "model_optim_rng.pt") if where.startswith("iter_") else \
        os.path.join(save, checkpointing.TRACKER_FILENAME)
    assert f"cannot write {target}: No space left on device; free space on that disk or point --save" in line, line
    assert line.startswith("error: rank 0 (tp 0 pp 0 dp 0) at iteration 4: "), line
    leftovers = [p for p in glob.glob(os.path.join(save, "**", "*.tmp"), recursive=True)]
    assert leftovers == []
    assert checkpointing.read_tracker(save) == (2, False)
    assert checkpointing.load_file(checkpointing.checkpoint_file(save, 2, 0, 0, 1))["iteration"] == 2
    assert not os.path.exists(os.path.join(save, LOCK_FILENAME))
    assert json.loads(Path(save, "failures", "rank_00000.json").read_text())["type"] == "CheckpointError"


def test_a_full_disk_at_startup_is_refused_before_training(tmp_path, capsys, monkeypatch) -> None:
    save = str(tmp_path / "ckpt")
    _disk_full_for(training, ".write_probe_", monkeypatch)
    monkeypatch.setattr(training, "train", lambda trainer: pytest.fail("training started"))
    line = _stops(ARGV + ["--save", save], capsys, 2)
    assert line.startswith(f"error: --save {save} is not writable (No space left on device: "), line
    assert line.endswith("make it writable or point --save elsewhere")
    assert os.listdir(save) == []


def test_a_read_only_save_is_refused_before_training(tmp_path, capsys, monkeypatch) -> None:
    """A --save directory this user cannot write stops the run before training, in one line. Root writes into
    read-only directories, so as root the command runs in a child without the capability that lets it."""
    save = tmp_path / "ckpt"
    save.mkdir()
    save.chmod(0o555)
    try:
        if os.geteuid() == 0:
            line = _save_refused_without_dac_override(ARGV + ["--save", str(save)])
        else:
            monkeypatch.setattr(training, "train", lambda trainer: pytest.fail("training started"))
            line = _stops(ARGV + ["--save", str(save)], capsys, 2)
        assert os.listdir(save) == []
    finally:
        save.chmod(0o755)
    where = re.escape(str(save))
    assert re.fullmatch(rf"error: --save {where} is not writable \(Permission denied: {where}/\.write_probe_\S+\); "
                        r"make it writable or point --save elsewhere", line), line


def _save_refused_without_dac_override(argv: List[str]) -> str:
    """As root: ``pretrain_gpt.py argv`` in a child whose capability bounding set lacks CAP_DAC_OVERRIDE (root
    then obeys file modes, as any user does); its one ``error:`` line (exit 2, no traceback)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    pr_capbset_drop, cap_dac_override = 24, 1  # <linux/prctl.h>, <linux/capability.h>

    def drop() -> None:
        if libc.prctl(pr_capbset_drop, cap_dac_override, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE)")

    done = subprocess.run([sys.executable, str(REPO / "pretrain_gpt.py"), *argv], cwd=str(REPO),
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=300, preexec_fn=drop)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = _error_lines(done.stderr)
    assert len(lines) == 1, done.stderr
    return lines[0]


# ------------------------------------------------------------------------------- Ctrl-C

SLOW_RUN = ["--train-iters", "100000", "--hidden-size", "64", "--num-layers", "2"]


def test_ctrl_c_is_one_line_exit_130_and_releases_the_lock(tmp_path) -> None:
    save = str(tmp_path / "ckpt")
    argv = ARGV + SLOW_RUN + ["--save", save, "--save-interval", "2", "--lr-decay-iters", "100000"]
    child = subprocess.Popen([sys.executable, "pretrain_gpt.py", *argv], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for line in child.stdout:  # the first log line: training is under way
            if line.lstrip().startswith("iteration "):
                break
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[-3000:]
    match = re.fullmatch(r"interrupted at iteration (\d+); the last checkpoint is (.*)", lines[0])
    assert match, lines[0]
    tracked = checkpointing.read_tracker(save)
    named = "none" if tracked is None else checkpointing.iteration_dir(save, tracked[0])
    assert match.group(2) == named
    assert tracked is None or tracked[0] % 2 == 0, "a save outside --save-interval: the interrupt saved"
    assert not os.path.exists(os.path.join(save, LOCK_FILENAME))
    assert not glob.glob(os.path.join(save, "**", "*.tmp"), recursive=True)


# ------------------------------------------------------------------------------- bad checkpoints

@pytest.fixture(scope="module")
def two_iterations(tmp_path_factory) -> str:
    save = str(tmp_path_factory.mktemp("saved") / "ckpt")
    run(ARGV + ["--train-iters", "2", "--save", save, "--save-interval", "1"])
    return save


def test_a_tracker_naming_a_missing_iteration_names_the_ones_there(two_iterations, tmp_path, capsys) -> None:
    root = str(tmp_path / "ckpt")
    shutil.copytree(two_iterations, root)
    Path(root, checkpointing.TRACKER_FILENAME).write_text("7")
    line = _stops(ARGV + ["--load", root], capsys, 2)
    assert line == (f"error: {os.path.join(root, checkpointing.TRACKER_FILENAME)} names iter_0000007, which does "
                    "not exist; the complete iterations are 1, 2: write one of them into the tracker, or delete "
                    "it to resume from the newest")


@pytest.mark.parametrize("flags", [["--finetune"], ["--use-checkpoint-args"], ["--use-distributed-optimizer"]])
def test_a_truncated_checkpoint_file_is_named_never_random_weights(two_iterations, tmp_path, capsys,
                                                                   flags: List[str]) -> None:
    root = str(tmp_path / "ckpt")
    shutil.copytree(two_iterations, root)
    name = "distrib_optim.pt" if "--use-distributed-optimizer" in flags else "model_optim_rng.pt"
    if name == "distrib_optim.pt":  # a checkpoint saved with the distributed optimizer
        shutil.rmtree(root)
        run(ARGV + ["--train-iters", "1", "--save", root] + flags)
    path = os.path.join(checkpointing.iteration_dir(root, checkpointing.read_tracker(root)[0]), "mp_rank_00", name)
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])
    line = _stops(ARGV + ["--load", root] + flags, capsys, 2)
    assert f"checkpoint file {path} is truncated or corrupt" in line, line
