"""``--profile``: a ``torch.profiler`` trace of the steps [``--profile-step-start``, ``--profile-step-end``).

Megatron's flags (``--use-pytorch-profiler`` is accepted; the trace is always torch.profiler's). Each rank of
``--profile-ranks`` (default 0) writes ``rank{R}.{timestamp}.pt.trace.json`` into ``--profile-save-path``
(default ``--tensorboard-dir``, else ``./profile``): TensorBoard's profiler plugin reads the directory and
Perfetto (ui.perfetto.dev) or ``chrome://tracing`` open the file. CPU activity is recorded, and the
accelerator's (CUDA, or an NPU through the private-use device activity its library registers) when there is one; each step is
marked (``ProfilerStep#k`` is the k-th profiled step: the run's step ``--profile-step-start + k``).
"""
from __future__ import annotations

import argparse
import os
import warnings
from typing import List, Optional

from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from core.device import profiler_activity


def profiler_activities(device_type: str) -> List[ProfilerActivity]:
    """CPU, plus the device's activity when the profiler knows it."""
    device_activity = profiler_activity(device_type)
    return [ProfilerActivity.CPU] + ([device_activity] if device_activity is not None else [])


# consumes: --use-pytorch-profiler (Megatron's choice of torch.profiler over nsys: the only profiler here, so the
# flag asks for what --profile does)
class StepProfiler:
    """Starts before step ``--profile-step-start`` and stops after step ``--profile-step-end`` - 1 (or at the
    run's end) on the profiled ranks; does nothing elsewhere."""

    def __init__(self, args: argparse.Namespace, rank: int, device_type: str) -> None:
        self.enabled = bool(args.profile) and rank in args.profile_ranks
        self.first, self.end = args.profile_step_start, args.profile_step_end
        self.directory = args.profile_save_path or args.tensorboard_dir or "profile"
        self.rank, self.device_type = rank, device_type
        self.running: Optional[profile] = None
        self.started_at, self.done = self.first, False

    def before_step(self, iteration: int) -> None:
        """``iteration``: the steps done so far (the step about to run is ``iteration``)."""
        if self.enabled and not self.done and self.running is None and self.first <= iteration < self.end:
            os.makedirs(self.directory, exist_ok=True)
            with warnings.catch_warnings():  # no warm-up steps: every step of the range is recorded
                warnings.simplefilter("ignore", UserWarning)
                # ProfilerStep#k is the run's step ``iteration + k``
                steps = schedule(wait=0, warmup=0, active=self.end - iteration, repeat=1)
                self.running = profile(activities=profiler_activities(self.device_type), record_shapes=True,
                                       schedule=steps, on_trace_ready=tensorboard_trace_handler(
                                           self.directory, worker_name=f"rank{self.rank}"))
                self.running.start()
            self.started_at = iteration

    def after_step(self, iteration: int) -> None:
        """``iteration``: the steps done, this one included."""
        if self.running is None:
            return
        self.running.step()
        if iteration >= self.end:
            self.stop(iteration)

    def stop(self, iteration: int) -> None:
        """Write the trace (also when the run ends inside the range)."""
        if self.running is None:
            return
        self.running.stop()
        self.running, self.done = None, True
        print(f"[rank {self.rank}] profile of steps [{self.started_at}, {iteration}) written to {self.directory}",
              flush=True)
