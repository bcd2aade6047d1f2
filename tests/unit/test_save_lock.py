"""One run per --save directory (mindspeed_llm/training/save_lock.py).

A lock held by a live process stops a second run before its first step, with one line naming the process,
and leaves the directory as it was; a lock whose process is gone is taken over with a warning; a finished
run removes its lock.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from mindspeed_llm.training.save_lock import LOCK_FILENAME
from mindspeed_llm.training.training import run

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "2",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0",
]


def _lock(directory, pid: int) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, LOCK_FILENAME)
    with open(path, "w") as handle:
        handle.write(f"{socket.gethostname()} {pid}\n")
    return path


def test_a_live_holder_stops_the_second_run(tmp_path, capsys) -> None:
    save = tmp_path / "ckpt"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _lock(save, holder.pid)
        with pytest.raises(SystemExit) as stop:
            run(ARGV + ["--save", str(save)])
        assert stop.value.code == 2
        assert f"--save {save} is in use by process {holder.pid} on this host" in capsys.readouterr().err
        assert sorted(os.listdir(save)) == [LOCK_FILENAME], "the refused run must not write anything"
        assert open(save / LOCK_FILENAME).read().split()[1] == str(holder.pid), "the holder's lock must stay"
    finally:
        holder.kill()
        holder.wait()


def test_a_stale_lock_is_taken_over_and_a_finished_run_removes_its_own(tmp_path, capsys) -> None:
    save = tmp_path / "ckpt"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _lock(save, gone.pid)
    trainer = run(ARGV + ["--save", str(save)])
    assert trainer.iteration == 2
    assert "taking over the stale lock" in capsys.readouterr().err
    assert not (save / LOCK_FILENAME).exists()
    assert (save / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
