"""The pretraining sampler: consecutive global batches, resumable from consumed samples.

Each step takes the next ``micro_batch_size x dp`` sample indices; data-parallel
rank ``r`` reads the ``r``-th block of ``micro_batch_size``. Starting from
``consumed_samples`` yields exactly the samples an uninterrupted run would read
next. (Megatron's MegatronPretrainingSampler has the same order.)
"""
from __future__ import annotations

from typing import Iterator, List


class PretrainingSampler:
    def __init__(self, total_samples: int, consumed_samples: int, micro_batch_size: int,
                 dp_rank: int, dp_size: int, drop_last: bool = True) -> None:
        if total_samples <= 0:
            raise ValueError(f"no samples to train on (total_samples={total_samples})")
        if consumed_samples >= total_samples:
            raise ValueError(f"consumed samples {consumed_samples} >= total samples {total_samples}")
        self.total_samples, self.consumed_samples = total_samples, consumed_samples
        self.micro_batch_size, self.dp_rank, self.dp_size = micro_batch_size, dp_rank, dp_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[List[int]]:
        step = self.micro_batch_size * self.dp_size
        start = self.dp_rank * self.micro_batch_size
        batch: List[int] = []
        for index in range(self.consumed_samples, self.total_samples):
            batch.append(index)
            if len(batch) == step:
                yield batch[start:start + self.micro_batch_size]
                batch = []
        if batch and not self.drop_last:
            yield batch[start:start + self.micro_batch_size]
