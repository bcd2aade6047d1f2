"""The run's progress beside the weights and the optimizer: one save and one load for both checkpoint formats.

:class:`TrainState` is the iteration, the consumed training samples (the data position: the sampler
resumes from there; validation reads its split from the start at every evaluation, so it has no
position), the skipped iterations and the learning-rate schedule. :meth:`TrainState.save` gives the
entries both formats write (the classic per-rank file, ``core/checkpointing.py``; the torch_dist
``common.pt``, ``dist_checkpoint.py``); :meth:`TrainState.load` restores them, and the RNG states each
format read for this rank. The loss scaler of ``--fp16`` travels with the optimizer's state.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from core import checkpointing
from core.tensor_parallel.random import set_all_rng_states
from mindspeed_llm.training.lr_scheduler import OptimizerParamScheduler

SCHEDULER_KEY = "opt_param_scheduler"


@dataclass
class TrainState:
    """Where the run is: iterations done, training samples consumed (the data position), iterations skipped."""
    scheduler: OptimizerParamScheduler
    iteration: int = 0
    consumed_samples: int = 0
    skipped_iterations: int = 0

    def save(self, rng: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The checkpoint entries: the schedule, the ``rng`` entry of a format that keeps it here, the counters."""
        return {SCHEDULER_KEY: self.scheduler.state_dict(), **(rng or {}),
                "consumed_train_samples": self.consumed_samples, "skipped_iterations": self.skipped_iterations}

    def load(self, saved: Mapping[str, Any], iteration: int, path: str, args: argparse.Namespace,
             schedule: bool, rng_states: Optional[Any]) -> None:
        """Resume from ``saved`` (a checkpoint's entries) at ``iteration``: the schedule too when ``schedule`` (the
        optimizer was resumed with it), and this rank's ``rng_states`` when given."""
        if schedule:
            self.load_schedule(saved, path, args)
        self.iteration = iteration
        self.consumed_samples = int(saved.get("consumed_train_samples", 0))
        self.skipped_iterations = int(saved.get("skipped_iterations", 0))
        if rng_states is not None:
            set_all_rng_states(rng_states)

    def load_schedule(self, saved: Mapping[str, Any], path: str, args: argparse.Namespace) -> None:
        """Megatron's rules: the flags' schedule must match the checkpoint's, unless overridden."""
        try:
            self.scheduler.load_state_dict(saved[SCHEDULER_KEY], override=args.override_opt_param_scheduler,
                                           use_checkpoint=args.use_checkpoint_opt_param_scheduler)
        except ValueError as error:
            raise checkpointing.CheckpointError(f"{path}: {error}") from None


def rank_rng_states(saved: Mapping[str, Any], dp_rank: int, args: argparse.Namespace) -> Optional[Any]:
    """This DP rank's RNG states from a classic checkpoint's ``rng_state`` list (each DP rank saved its own;
    a list shorter than this run's DP gives its first), or None with --no-load-rng or none saved."""
    rng = saved.get("rng_state")
    if args.no_load_rng or rng is None:
        return None
    return rng[dp_rank] if dp_rank < len(rng) else rng[0]
