"""Ending a run early and cleanly: ``--exit-signal-handler`` and ``--exit-duration-in-mins`` (Megatron's flags).

A scheduler that preempts a job sends SIGTERM to every training process; a job has a wall-time budget.
Either way the run should stop at an iteration boundary that every rank agrees on, save, and exit 0, so
that resubmitting the same command resumes exactly. :class:`ExitConditions` records a SIGTERM in a flag
(the handler does nothing else: it may run inside any operation), and after each step one MAX all-reduce
over the world tells every rank whether any rank saw the signal or ran out of time.
"""
from __future__ import annotations

import argparse
import signal
import time
from typing import Any, Optional

import torch

from core.tensor_parallel.mappings import any_rank_each


class ExitConditions:
    """The signal flag and the time budget of one run; a context manager that installs the handler."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        self.handle_signal = bool(args.exit_signal_handler)
        self.budget_seconds = None if args.exit_duration_in_mins is None else 60.0 * args.exit_duration_in_mins
        self.device = device
        self.started = time.monotonic()
        self.signalled = False
        self._previous: Optional[Any] = None

    @property
    def active(self) -> bool:
        return self.handle_signal or self.budget_seconds is not None

    def __enter__(self) -> "ExitConditions":
        if self.handle_signal:
            self._previous = signal.signal(signal.SIGTERM, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.handle_signal:
            signal.signal(signal.SIGTERM, self._previous)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signalled = True

    def reason_to_stop(self) -> Optional[str]:
        """Why every rank stops after this step, or None. Collective over the world when a condition is set."""
        if not self.active:
            return None
        over_time = self.budget_seconds is not None and time.monotonic() - self.started >= self.budget_seconds
        signalled, over_time = any_rank_each([self.signalled, over_time], device=self.device)
        if signalled:
            return "SIGTERM received (--exit-signal-handler)"
        if over_time:
            return f"--exit-duration-in-mins {self.budget_seconds / 60.0:g} reached"
        return None
