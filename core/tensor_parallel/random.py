"""RNG state tracking for tensor-parallel regions, on any device.

Dropout inside a tensor-parallel region (attention probabilities of this
rank's heads) must differ across TP ranks, while dropout on replicated
activations must agree. As in Megatron, the default generator is seeded
identically on the ranks of a TP group and a second, named state
(``model-parallel-rng``) is seeded per TP rank; ``fork()`` swaps it in.
"""
from __future__ import annotations

import contextlib
import random
from typing import Dict, Iterator, Tuple

import numpy as np
import torch

from core.device import accelerator

MODEL_PARALLEL_RNG = "model-parallel-rng"
_MODEL_PARALLEL_SEED_OFFSET = 2718
_PIPELINE_SEED_STRIDE = 100


class RNGStatesTracker:
    """Named device RNG states, swapped in by ``fork(name)``."""

    def __init__(self) -> None:
        self.states: Dict[str, torch.Tensor] = {}

    def reset(self) -> None:
        self.states = {}

    def add(self, name: str, seed: int) -> None:
        if name in self.states:
            raise ValueError(f"RNG state {name!r} already exists")
        acc = accelerator()
        saved = acc.get_rng_state()
        acc.manual_seed(seed) if acc.module is not None else torch.manual_seed(seed)
        self.states[name] = acc.get_rng_state()
        acc.set_rng_state(saved)

    def get_states(self) -> Dict[str, torch.Tensor]:
        return {name: state.clone() for name, state in self.states.items()}

    def set_states(self, states: Dict[str, torch.Tensor]) -> None:
        self.states = {name: state.clone() for name, state in states.items()}

    @contextlib.contextmanager
    def fork(self, name: str = MODEL_PARALLEL_RNG) -> Iterator[None]:
        if name not in self.states:
            raise KeyError(f"RNG state {name!r} was never added; call model_parallel_seed first")
        acc = accelerator()
        saved = acc.get_rng_state()
        acc.set_rng_state(self.states[name])
        try:
            yield
        finally:
            self.states[name] = acc.get_rng_state()
            acc.set_rng_state(saved)


_TRACKER = RNGStatesTracker()


def get_rng_tracker() -> RNGStatesTracker:
    return _TRACKER


def model_parallel_seed(seed: int, tp_rank: int, pp_rank: int) -> None:
    """Seed python, numpy, torch and the tracker the way Megatron does."""
    stage_seed = seed + _PIPELINE_SEED_STRIDE * pp_rank
    random.seed(stage_seed)
    np.random.seed(stage_seed)
    torch.manual_seed(stage_seed)
    accelerator().manual_seed(stage_seed)
    _TRACKER.reset()
    _TRACKER.add(MODEL_PARALLEL_RNG, stage_seed + _MODEL_PARALLEL_SEED_OFFSET + tp_rank)


def get_dropout_rng_states() -> Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]:
    """The states dropout draws from: the default CPU and device generators and the tracker's."""
    return torch.get_rng_state(), accelerator().get_rng_state(), _TRACKER.get_states()


def set_dropout_rng_states(states: Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]) -> None:
    cpu_state, device_state, tracker_states = states
    torch.set_rng_state(cpu_state)
    accelerator().set_rng_state(device_state)  # on the CPU the same generator, set to the same state
    _TRACKER.set_states(tracker_states)


def _numpy_state_as_tensors() -> tuple:
    """numpy's RNG state with its key array as a tensor (loadable with weights_only=True)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return (kind, torch.from_numpy(keys.copy()), int(pos), int(has_gauss), float(cached))


def get_all_rng_states() -> dict:
    """Every RNG state a resume needs, as tensors and plain values."""
    return {
        "random_rng_state": random.getstate(),
        "np_rng_state": _numpy_state_as_tensors(),
        "torch_rng_state": torch.get_rng_state(),
        "device_rng_state": accelerator().get_rng_state(),
        "rng_tracker_states": _TRACKER.get_states(),
    }


def set_all_rng_states(states: dict) -> None:
    random.setstate(states["random_rng_state"])
    kind, keys, pos, has_gauss, cached = states["np_rng_state"]
    np.random.set_state((kind, keys.numpy(), pos, has_gauss, cached))
    torch.set_rng_state(states["torch_rng_state"])
    accelerator().set_rng_state(states["device_rng_state"])
    _TRACKER.set_states(states["rng_tracker_states"])
