"""Synthetic token sequences for ``--mock-data``.

Sample ``i`` is drawn from a generator seeded by ``(seed, i)`` alone, so the
token stream is fixed by the seed and the sample index: it does not depend on
the parallel layout, and a resumed run sees exactly the samples an
uninterrupted run would.

Each sample is an arithmetic progression modulo the vocabulary, with a
random start and a random stride in ``[1, 8)``: ``(start + stride * t) % V``.
Uniform random tokens would leave nothing to learn (the loss stays at
``log V``); a progression is learnable from two tokens of context, so the
loss of a working model falls far below ``log V`` within a few hundred steps,
which makes a training demo and a smoke test meaningful.
"""
from __future__ import annotations

from typing import Dict

import torch

MAX_STRIDE = 8


class MockGPTDataset:
    """``num_samples`` sequences of ``seq_length + 1`` tokens in ``[0, vocab_size)``."""

    def __init__(self, num_samples: int, seq_length: int, vocab_size: int, seed: int) -> None:
        self.num_samples, self.seq_length = num_samples, seq_length
        self.vocab_size, self.seed = vocab_size, seed

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> Dict[str, torch.Tensor]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"sample {index} out of range [0, {self.num_samples})")
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        start = torch.randint(0, self.vocab_size, (1,), generator=generator)
        stride = torch.randint(1, MAX_STRIDE, (1,), generator=generator)
        positions = torch.arange(self.seq_length + 1)
        return {"text": (start + stride * positions) % self.vocab_size}  # [s + 1] int64
