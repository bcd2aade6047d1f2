"""One run per ``--save`` directory: a lock file holding the host and pid of the run that writes there.

Two runs sharing a checkpoint directory overwrite each other's iterations and trackers, and each reports
success. Global rank 0 creates ``<save>/.lock`` exclusively before training; a lock left by a process that
is still alive on this host (or by one on another host, whose liveness cannot be checked here) stops the
new run before any step, with one line naming the holder; a lock whose process is dead is stale and taken
over with a warning. The lock is removed when the run ends, however it ends.
"""
from __future__ import annotations

import os
import socket
import sys
from typing import Optional, Tuple

LOCK_FILENAME = ".lock"


class SaveDirectoryInUse(RuntimeError):
    """Another live run holds the ``--save`` directory's lock."""


def _holder(path: str) -> Optional[Tuple[str, int]]:
    """(host, pid) written in the lock file, or None when it is unreadable."""
    try:
        host, pid = open(path).read().split()
        return host, int(pid)
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class SaveLock:
    """The lock of one ``--save`` directory, taken by :meth:`acquire` and dropped by :meth:`release`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILENAME)
        self.held = False

    def acquire(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        me = (socket.gethostname(), os.getpid())
        for _ in range(2):  # a stale lock is removed once, then taken
            try:
                handle = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = _holder(self.path)
                if holder == me:  # this process already holds it (a second run in the same process)
                    self.held = True
                    return
                if holder is not None and (holder[0] != me[0] or _alive(holder[1])):
                    where = "on this host" if holder[0] == me[0] else f"on host {holder[0]}"
                    raise SaveDirectoryInUse(
                        f"--save {self.directory} is in use by process {holder[1]} {where} ({self.path}); "
                        "give this run its own --save, or delete the lock if that run is gone") from None
                print(f"WARNING: taking over the stale lock {self.path} (held by {holder}, no longer running)",
                      file=sys.stderr, flush=True)
                os.remove(self.path)
                continue
            with os.fdopen(handle, "w") as lock:
                lock.write(f"{me[0]} {me[1]}\n")
            self.held = True
            return

    def release(self) -> None:
        if self.held and _holder(self.path) == (socket.gethostname(), os.getpid()):
            os.remove(self.path)
        self.held = False
