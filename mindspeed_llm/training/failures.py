"""Every rank's last error, kept where the user looks after a failed run: ``<--save>/failures/``.

A run that dies on many ranks leaves its story scattered over their logs. When an exception escapes training
(a non-finite loss stop, a checkpoint that cannot be written, a collective that timed out, a bug), each rank
writes ``<save>/failures/rank_<global rank, 5 digits>.json``, atomically: the iteration, the rank's
coordinates (global rank, TP/PP/DP/CP/EP rank), the host, the pid, the time, the exception's type, message
and traceback. Global rank 0 then prints one line, ``error: rank 3 (tp 1 pp 1 dp 0) at iteration 12: ...;
details in <save>/failures/``: it waits a moment for the other ranks' files and names the first failure (by
time); when every rank failed the same way (a NaN stop) the line names them all; when it cannot learn about
the others it names its own. Without ``--save`` nothing is written.

Stale files: a run that takes the ``--save`` lock first moves the files a previous run left into
``failures/old/<their time>/``, so ``failures/rank_*.json`` always describe the latest run, and a run that
succeeds leaves none there. A rank that cannot write its file (the disk is full) says so on stderr and goes on
failing as it would have.

Ctrl-C (:class:`InterruptWatch`) is not a failure: no file, no save (as Megatron), one line from rank 0
naming the iteration and the last checkpoint, exit status 130.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

import torch.distributed as dist

from core import checkpointing

FAILURES_DIRNAME = "failures"
OLD_DIRNAME = "old"  # failures/old/<time>/: the files of earlier runs
SUMMARY_WAIT_SECONDS = 3.0  # how long rank 0 waits for the other ranks' files before it summarises


@dataclass(frozen=True)
class RankPlace:
    """Where a rank sits in the run: its global rank and its coordinates in every parallel dimension."""

    rank: int
    world_size: int
    tp: int = 0
    pp: int = 0
    dp: int = 0
    cp: int = 0
    ep: int = 0

    @classmethod
    def of(cls, state: Any) -> "RankPlace":
        """The place of this process from a ParallelState."""
        return cls(state.rank, state.world_size, state.tp_rank, state.pp_rank, state.dp_rank, state.cp_rank,
                   state.ep_group.rank)

    def describe(self) -> str:
        """``tp 1 pp 1 dp 0`` (and ``cp``/``ep`` when they are not 0)."""
        text = f"tp {self.tp} pp {self.pp} dp {self.dp}"
        return text + "".join(f" {name} {value}" for name, value in (("cp", self.cp), ("ep", self.ep)) if value)


def failures_dir(save: str) -> str:
    return os.path.join(save, FAILURES_DIRNAME)


def failure_file(save: str, rank: int) -> str:
    return os.path.join(failures_dir(save), f"rank_{rank:05d}.json")


def _current_files(save: str) -> List[str]:
    directory = failures_dir(save)
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(os.path.join(directory, n) for n in names if n.startswith("rank_") and n.endswith(".json"))


def archive_previous(save: str) -> Optional[str]:
    """Move the failure files an earlier run left into ``failures/old/<time of the newest>/``; returns that
    directory (None: there were none). Called by global rank 0 holding the lock, before any rank trains."""
    files = _current_files(save)
    if not files:
        return None
    newest = max(os.path.getmtime(path) for path in files)
    stamp = datetime.fromtimestamp(newest, timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    target = os.path.join(failures_dir(save), OLD_DIRNAME, stamp)
    os.makedirs(target, exist_ok=True)
    for path in files:
        shutil.move(path, os.path.join(target, os.path.basename(path)))
    return target


def failure_record(place: RankPlace, iteration: int, error: BaseException) -> Dict[str, Any]:
    """What one rank's file holds."""
    return {
        **asdict(place),
        "iteration": iteration,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "time": datetime.now(timezone.utc).isoformat(),
        "unix_time": time.time(),
        "type": type(error).__name__,
        "message": one_line(error),
        "traceback": "".join(traceback.format_exception(type(error), error, error.__traceback__)),
    }


def one_line(error: BaseException) -> str:
    """The first line of the error's message, without the C++ source location gloo and NCCL put first (the
    error's type when it has no message)."""
    lines = str(error).strip().splitlines()
    line = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", lines[0]) if lines else ""
    return line or type(error).__name__


def collective_failure(error: BaseException) -> bool:
    """Whether ``error`` came out of a torch.distributed call: a collective that timed out, a peer that died."""
    if isinstance(error, dist.DistError):
        return True
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and f"{os.sep}torch{os.sep}distributed{os.sep}" in frames[-1].filename


def record_failure(save: Optional[str], place: RankPlace, iteration: int, error: BaseException) -> Optional[str]:
    """Write this rank's failure file (atomically); returns its path, or None without --save or when it could
    not be written (said on stderr: recording a failure never raises)."""
    if not save:
        return None
    path = failure_file(save, place.rank)
    try:
        os.makedirs(failures_dir(save), exist_ok=True)
        checkpointing._write_text(path, json.dumps(failure_record(place, iteration, error), indent=1) + "\n")
    except Exception as write_error:  # a full disk: the error itself is what matters
        print(f"[rank {place.rank}] could not record this failure in {path}: {one_line(write_error)}",
              file=sys.stderr, flush=True)
        return None
    return path


def read_failures(save: str) -> List[Dict[str, Any]]:
    """The failure records of the latest run, oldest first (unreadable files are skipped)."""
    records = []
    for path in _current_files(save):
        try:
            with open(path) as handle:
                records.append(json.load(handle))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda record: record.get("unix_time", 0.0))


def wait_for_failures(save: str, world_size: int, seconds: float = SUMMARY_WAIT_SECONDS) -> List[Dict[str, Any]]:
    """The latest run's records once every rank has written one, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    records = read_failures(save)
    while len(records) < world_size and time.monotonic() < deadline:
        time.sleep(0.1)
        records = read_failures(save)
    return records


def _ranks_text(ranks: List[int], world_size: int) -> str:
    """``ranks 0-3 (all 4)``, ``ranks 0, 2``, ``rank 5``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    whole = f" (all {world_size})" if len(ranks) == world_size else ""
    if ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}-{ranks[-1]}{whole}"
    return f"ranks {', '.join(map(str, ranks))}{whole}"


def summary_line(records: List[Dict[str, Any]], save: Optional[str]) -> str:
    """Rank 0's one line (without ``error: ``): the first failure, with the ranks that failed the same way."""
    first = records[0]
    alike = sorted(r["rank"] for r in records
                   if (r["type"], r["message"], r["iteration"]) == (first["type"], first["message"], first["iteration"]))
    if len(alike) == 1:
        place = RankPlace(**{name: first[name] for name in RankPlace.__dataclass_fields__})
        who = f"rank {first['rank']} ({place.describe()})"
    else:
        who = _ranks_text(alike, first["world_size"])
    others = len(records) - len(alike)
    after = f" ({others} other rank(s) failed after it)" if others else ""
    details = f"; details in {failures_dir(save)}{os.sep}" if save else ""
    return f"{who} at iteration {first['iteration']}: {first['message']}{after}{details}"


def report(save: Optional[str], place: RankPlace, iteration: int, error: BaseException, *,
           everyone_fails: bool = False) -> Optional[str]:
    """Record this rank's failure; return the line this rank prints (without ``error: ``), or None.

    Rank 0 prints the summary of what the failures directory holds (its own failure when that is all it can
    learn). Another rank prints its own line, unless ``everyone_fails`` (every rank raised the same error at
    the same step, as the NaN stop: rank 0's line says it all). Without ``save``: no file, and the line is
    the error's message, as before failures were recorded.
    """
    if not save:  # nothing recorded, today's line: the message
        return one_line(error) if place.rank == 0 or not everyone_fails else None
    written = record_failure(save, place, iteration, error)
    own = failure_record(place, iteration, error)
    if place.rank != 0:
        if everyone_fails:
            return None
        return summary_line([own], save if written else None)
    records = wait_for_failures(save, place.world_size) if written and place.world_size > 1 else []
    if not written or not records:
        return summary_line([own], save if written else None)
    if all(record["rank"] != 0 for record in records):  # rank 0's own file vanished: still name it
        records.append(own)
    return summary_line(records, save)


INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what shells report for a process ended by Ctrl-C


class InterruptWatch:
    """Notes a SIGINT during training, so that whatever exception it becomes (a KeyboardInterrupt raised in a
    gradient hook, a collective cut short) is known as an interrupt; a second Ctrl-C acts as usual.

    A process that ignores SIGINT (started in the background by a shell) keeps ignoring it.
    """

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None

    def __enter__(self) -> "InterruptWatch":
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, None):
            self._previous = signal.signal(signal.SIGINT, self._on_interrupt)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        self.received = True
        self.__exit__()
        raise KeyboardInterrupt


def last_checkpoint(save: Optional[str]) -> str:
    """The checkpoint a resume from ``save`` would start at (the tracker's iteration), or ``none``."""
    if not save:
        return "none (no --save)"
    try:
        tracked = checkpointing.read_tracker(save)
    except checkpointing.CheckpointError:
        tracked = None
    if tracked is None:
        return "none"
    iteration, release = tracked
    return checkpointing.iteration_dir(save, iteration, release)


def interrupted_line(iteration: int, save: Optional[str]) -> str:
    return f"interrupted at iteration {iteration}; the last checkpoint is {last_checkpoint(save)}"
