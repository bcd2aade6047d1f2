"""Allocated bytes and their peak over a stretch of code, on any device: the device allocator's statistics on a GPU
or NPU, on the CPU the bytes of the tensor storages operators create, counted until freed.

    probe = MemoryProbe()
    with probe.measuring():
        loss = model(x).sum(); loss.backward()
    print(probe.peak_above_start())   # bytes

Benchmarks (``bench/activation_memory.py``, ``bench/linear_attention.py``, ``bench/lora.py``) and the tests that
check how memory grows (``tests/unit/test_sparse_attention.py``) share it.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Dict, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class StorageCounter(TorchDispatchMode):
    """Bytes of the tensor storages operators create, counted until each is freed (CPU statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._tracked: Dict[int, int] = {}

    def _forget(self, key: int) -> None:
        self.live -= self._tracked.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0]
                  if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in inputs or key in self._tracked or storage.nbytes() == 0:
                continue  # a view or in-place result of an input, or already counted
            self._tracked[key] = storage.nbytes()
            self.live += storage.nbytes()
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._forget, key)
        return out


class MemoryProbe:
    """Allocated bytes now and the peak since :meth:`measuring` began (device allocator, or counted on the CPU)."""

    def __init__(self) -> None:
        from core.device import accelerator

        self.module = accelerator().module  # torch.cuda / torch.npu, None on the CPU
        self._counter = None
        self._start = 0

    def allocated(self) -> int:
        if self.module is not None:
            return self.module.memory_allocated()
        return self._counter.live if self._counter is not None else 0

    @contextlib.contextmanager
    def measuring(self) -> Iterator[None]:
        if self.module is not None:
            self.module.synchronize()
            self.module.reset_peak_memory_stats()
            self._start = self.module.memory_allocated()
            yield
            self.module.synchronize()
            return
        self._counter = StorageCounter()
        with self._counter:
            yield

    def peak_above_start(self) -> int:
        if self.module is not None:
            return self.module.max_memory_allocated() - self._start
        return self._counter.peak
