"""Synthetic token sequences for ``--mock-data``.

Sample ``i`` is drawn from a generator seeded by ``(seed, i)`` alone, so the
token stream is fixed by the seed and the sample index: it does not depend on
the parallel layout, and a resumed run sees exactly the samples an
uninterrupted run would.
"""
from __future__ import annotations

from typing import Dict

import torch


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
        tokens = torch.randint(0, self.vocab_size, (self.seq_length + 1,), generator=generator)
        return {"text": tokens}
