"""Named wall-clock regions of a training step (Megatron's timers, ``--timing-log-level``).

The trainer installs a :class:`RegionTimers` when timing is on; code on the hot path marks its regions with
``with timed("forward-compute"):``, which does nothing (one global read) while no timers are installed.
With timers installed each region synchronizes the device at its start and its end, so accelerator work is
charged to the region that queued it (the price of exact timings, as Megatron's timers with barriers).
Regions may nest (``forward-backward`` holds ``forward-compute``); each is summed on its own.

Regions marked today: ``batch-generator`` (drawing micro-batches, GRPO's rollouts included),
``forward-compute`` and ``backward-compute`` (the pipeline schedules), ``pipeline-p2p`` (stage-to-stage
exchanges), ``grads-reduce`` (finishing the data-parallel gradient reduction) and ``optimizer``; the
trainer adds ``forward-backward``.
"""
from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Callable, DefaultDict, Dict, Iterator, Optional


class RegionTimers:
    """Seconds per region name, summed until :meth:`take`."""

    def __init__(self, synchronize: Callable[[], None] = lambda: None) -> None:
        self.synchronize = synchronize
        self.seconds: DefaultDict[str, float] = defaultdict(float)

    def take(self) -> Dict[str, float]:
        """The sums since the last take (and reset them)."""
        out = dict(self.seconds)
        self.seconds.clear()
        return out


_installed: Optional[RegionTimers] = None


def install(timers: Optional[RegionTimers]) -> None:
    """Make ``timers`` the ones :func:`timed` adds to (None: timing off)."""
    global _installed
    _installed = timers


def installed() -> Optional[RegionTimers]:
    return _installed


@contextlib.contextmanager
def timed(name: str) -> Iterator[None]:
    """Add the wall time of the block to region ``name`` of the installed timers (nothing when none are)."""
    timers = _installed
    if timers is None:
        yield
        return
    timers.synchronize()
    start = time.perf_counter()
    try:
        yield
    finally:
        timers.synchronize()
        timers.seconds[name] += time.perf_counter() - start
