"""The shared launcher reports a rank that dies without a Python exception with the tail of its stderr.

A C++ abort inside a collective library leaves no traceback; the launcher must still say what the
rank printed last (the C++ message and faulthandler's Python stack), or a CI failure cannot be read.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch.distributed as dist

from core.launcher import run_distributed


def _worker(rank: int, world_size: int, mode: str) -> int:
    dist.barrier()
    if rank == 1 and mode == "abort":
        sys.stderr.write("rank 1 is about to abort\n")
        sys.stderr.flush()
        os.abort()
    if rank == 1 and mode == "raise":
        raise ValueError("rank 1 raised")
    return rank * 10


def test_launcher_returns_values_and_reports_aborts_and_exceptions() -> None:
    assert run_distributed(2, _worker, "ok") == [0, 10]
    with pytest.raises(RuntimeError) as aborted:
        run_distributed(2, _worker, "abort", timeout=60)
    message = str(aborted.value)
    assert "rank(s) [1] exited with code(s) [-6]" in message
    assert "rank 1 is about to abort" in message
    assert "in _worker" in message  # faulthandler's Python stack of the aborting rank
    with pytest.raises(RuntimeError, match="ValueError: rank 1 raised"):
        run_distributed(2, _worker, "raise", timeout=60)
