"""Crash-safe saving, --auto-resume and --ckpt-keep-last.

* A process SIGKILLed during a save (inside the model file's write, before the completion marker, before
  the tracker; with ``--ckpt-format torch_dist`` inside DCP's data write, synchronous or in the
  ``--async-save`` thread, and before the marker) leaves nothing ``--load`` would use: the next run resumes
  from the previous checkpoint and its losses equal an uninterrupted run's.
* Three submissions of one ``--auto-resume`` command (each stopped by ``--exit-interval``) finish a run
  bitwise equal to one long run.
* ``--ckpt-keep-last N`` keeps the newest N complete iterations.
* A lost tracker: ``--load`` takes the newest complete iteration and skips a half-written newer one.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import List

import pytest

from core import checkpointing
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.training import run

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "4",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1",
]
KILLER = """
import os, signal, sys
from core import checkpointing
from mindspeed_llm.training.training import run
point, argv = sys.argv[1], sys.argv[2:]
def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
if point == "model_file":
    original = checkpointing.atomic_save
    def atomic_save(obj, path):
        if "iter_0000004" in path:  # a torn file under the temporary name, then death
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "wb") as handle:
                handle.write(b"partial")
            kill()
        return original(obj, path)
    checkpointing.atomic_save = atomic_save
elif point == "marker":
    original_mark = checkpointing.mark_complete
    checkpointing.mark_complete = lambda root, iteration: kill() if iteration == 4 else original_mark(root, iteration)
elif point == "dcp_data":  # --ckpt-format torch_dist: inside DCP's write of the data file
    from torch.distributed.checkpoint import FileSystemWriter
    original_write = FileSystemWriter.write_data
    def write_data(self, plan, planner):
        if "iter_0000004" in str(self.path):
            kill()
        return original_write(self, plan, planner)
    FileSystemWriter.write_data = write_data
elif point == "tracker":
    original_tracker = checkpointing.write_tracker
    checkpointing.write_tracker = (lambda root, iteration, release=False:
                                   kill() if iteration == 4 else original_tracker(root, iteration, release))
run(argv)
"""


@pytest.fixture(scope="module")
def uninterrupted() -> List[float]:
    return run(ARGV).losses


DIST = ["--ckpt-format", "torch_dist"]


@pytest.mark.parametrize("point,fmt", [("model_file", []), ("marker", []), ("tracker", []), ("dcp_data", DIST),
                                       ("marker", DIST), ("dcp_data", DIST + ["--async-save"])],
                         ids=["model_file", "marker", "tracker", "dist-data", "dist-marker", "dist-async-data"])
def test_a_kill_during_a_save_resumes_from_the_previous_checkpoint(tmp_path, uninterrupted, point: str,
                                                                   fmt: List[str]) -> None:
    save = str(tmp_path / "ckpt")
    killed = subprocess.run([sys.executable, "-c", KILLER, point, *ARGV, *fmt, "--save", save, "--save-interval", "2"],
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert checkpointing.read_tracker(save) == (2, False)
    resumed = run(ARGV + ["--load", save])
    assert resumed.losses == uninterrupted[2:], f"killed at {point}: the resumed run differs"


def test_three_auto_resume_submissions_equal_one_long_run(tmp_path, uninterrupted) -> None:
    save = str(tmp_path / "ckpt")  # does not exist yet: the first submission starts fresh
    command = ARGV + ["--auto-resume", "--save", save, "--save-interval", "100", "--exit-interval", "2",
                      "--train-iters", "6"]
    long_run = run(ARGV + ["--train-iters", "6"]).losses
    losses, iterations = [], []
    for _ in range(3):
        trainer = run(list(command))
        losses += trainer.losses
        iterations.append(trainer.iteration)
    assert iterations == [2, 4, 6]
    assert losses == long_run


def test_keep_last_and_a_lost_tracker(tmp_path, capsys) -> None:
    save = str(tmp_path / "ckpt")
    run(ARGV + ["--train-iters", "5", "--lr-decay-iters", "6", "--save", save, "--save-interval", "1",
                "--ckpt-keep-last", "2"])
    kept = sorted(name for name in os.listdir(save) if name.startswith("iter_"))
    assert kept == ["iter_0000004", "iter_0000005"]
    assert checkpointing.complete_iterations(save) == [4, 5]
    os.remove(os.path.join(save, checkpointing.TRACKER_FILENAME))
    half = os.path.join(save, "iter_0000006")
    shutil.copytree(os.path.join(save, "iter_0000005"), half)
    os.remove(os.path.join(half, checkpointing.COMPLETE_MARKER))  # a save that died before its marker
    resumed = run(ARGV + ["--train-iters", "6", "--lr-decay-iters", "6", "--load", save])
    err = capsys.readouterr().err
    assert "iter_0000006 has no checkpoint_complete marker" in err and "newest complete iteration 5" in err
    assert resumed.iteration == 6 and len(resumed.losses) == 1


@pytest.mark.parametrize("extra, message", [
    (["--auto-resume"], "--auto-resume needs --save"),
    (["--ckpt-keep-last", "2"], "--ckpt-keep-last needs --save"),
    (["--save", "S", "--ckpt-keep-last", "0"], "--ckpt-keep-last must be at least 1"),
    (["--save", "S", "--load", "L", "--auto-resume"], "--auto-resume resumes from --save S; drop --load L or"),
    (["--save", "FILE"], "is a file, not a directory"),
])
def test_bad_checkpoint_flags(tmp_path, extra: List[str], message: str) -> None:
    (tmp_path / "FILE").write_text("not a directory")
    (tmp_path / "L").mkdir()
    extra = [str(tmp_path / value) if value in ("S", "L", "FILE") else value for value in extra]
    message = message.replace(" S;", f" {tmp_path / 'S'};").replace(" L or", f" {tmp_path / 'L'} or")
    with pytest.raises(ArgumentError, match=message.replace("(", r"\(")):
        validate_args(parse_args(ARGV + extra), 1)


@pytest.mark.parametrize("flags", [["--finetune"], ["--use-checkpoint-args"], []])
def test_a_misplaced_load_is_an_error_not_random_weights(tmp_path, capsys, flags: List[str]) -> None:
    """--load of one iteration's directory, or of a Hugging Face model, stops with the directory to give."""
    save = str(tmp_path / "ckpt")
    run(ARGV + ["--train-iters", "1", "--save", save])
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    (hf / "model.safetensors").write_bytes(b"")
    for load, expected in ((os.path.join(save, "iter_0000001"), f"give --load {save}"),
                           (str(hf), "is a Hugging Face model, not a checkpoint of this suite; convert it first")):
        with pytest.raises(SystemExit) as stop:
            run(ARGV + ["--load", load] + flags)
        assert stop.value.code == 2
        assert expected in capsys.readouterr().err
