"""Preference pairs over the packed files written by ``preprocess_data.py`` (pairwise handlers).

Files, per ``prefix`` (see ``mindspeed_llm/data/handlers.py``), each a Megatron indexed dataset whose item
``i`` is pair ``i``: ``{prefix}_packed_{chosen,rejected}_{input_ids,labels}_document``, the labels aligned
with the input ids and -100 (``IGNORE_INDEX``) on the prompt (only the final reply is trained).

A sample is one pair; each side is truncated to ``seq_length + 1`` tokens, padded, and shifted for
next-token prediction, as ``sft_dataset.py`` does with one sequence. It is returned as:

- ``{side}_tokens`` int64 ``[s]``: input ids ``[0, s)``; padding is ``pad_token_id``;
- ``{side}_labels`` int64 ``[s]``: the next token's label, 0 where it is not trained;
- ``{side}_loss_mask`` float32 ``[s]``: 1 where the next token is a trained reply token;
- ``{side}_length`` int64 ``[]``: the number of real (unpadded) input tokens (a reward model scores the
  last of them);
- ``pair`` int64 ``[]``: the pair's index in the files (precomputed reference log-probs are kept by it);

for ``side`` in ``chosen`` and ``rejected``. Sample order: each epoch a permutation of the pairs from
``numpy.random.RandomState(seed)``, as many epochs as ``num_samples`` needs (as ``SFTPackedDataset``), over
``sequence_ids`` (a split's pairs, e.g. ``--split``'s validation part; by default every pair).
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetError
from core.datasets.sft_dataset import IGNORE_INDEX, checked_sequence_ids, packed_prefix

PAIR_SIDES = ("chosen", "rejected")
PAIRWISE_FILES = tuple(f"{side}_{column}" for side in PAIR_SIDES for column in ("input_ids", "labels"))


def pairwise_files_exist(prefix: str) -> bool:
    return all(os.path.isfile(packed_prefix(prefix, name) + ".idx") for name in PAIRWISE_FILES)


class PairwiseDataset(torch.utils.data.Dataset):
    """Chosen and rejected replies of each preference pair, shifted and masked for the training loop."""

    def __init__(self, prefix: str, seq_length: int, num_samples: Optional[int] = None, seed: int = 1234,
                 pad_token_id: int = 0, shuffle: bool = True, mmap: bool = True,
                 sequence_ids: Optional[Sequence[int]] = None) -> None:
        self.prefix, self.seq_length, self.pad_token_id = prefix, seq_length, pad_token_id
        self.files = {name: IndexedDataset(packed_prefix(prefix, name), mmap=mmap) for name in PAIRWISE_FILES}
        self._check_aligned()
        self.num_pairs = len(self.files[PAIRWISE_FILES[0]])  # in the files (a split may draw from fewer)
        if self.num_pairs == 0:
            raise IndexedDatasetError(f"{packed_prefix(prefix, PAIRWISE_FILES[0])}: no pairs")
        self.sequence_ids = checked_sequence_ids(sequence_ids, self.num_pairs,
                                                 packed_prefix(prefix, PAIRWISE_FILES[0]))  # [n] pair ids drawn from
        self.num_samples = len(self.sequence_ids) if num_samples is None else num_samples
        self.order = self._build_order(seed, shuffle)  # [num_samples] pair ids

    def _check_aligned(self) -> None:
        for side in PAIR_SIDES:
            ids, labels = (self.files[f"{side}_{column}"] for column in ("input_ids", "labels"))
            if len(ids) != len(self.files[PAIRWISE_FILES[0]]) or not np.array_equal(
                    ids.sequence_lengths, labels.sequence_lengths):
                raise IndexedDatasetError(f"{packed_prefix(self.prefix, side + '_labels')}: its lengths differ from "
                                          f"{packed_prefix(self.prefix, side + '_input_ids')}; the files do not match")

    def _build_order(self, seed: int, shuffle: bool) -> np.ndarray:
        rng = np.random.RandomState(seed)
        epochs: List[np.ndarray] = []
        for _ in range(-(-self.num_samples // len(self.sequence_ids))):
            epoch = self.sequence_ids.copy()
            if shuffle:
                rng.shuffle(epoch)
            epochs.append(epoch)
        return np.concatenate(epochs)[:self.num_samples]

    def __len__(self) -> int:
        return self.num_samples

    def _padded(self, name: str, pair: int, fill: int) -> np.ndarray:
        values = np.asarray(self.files[name][pair][:self.seq_length + 1], dtype=np.int64)
        out = np.full(self.seq_length + 1, fill, dtype=np.int64)  # [s + 1]
        out[:len(values)] = values
        return out

    def side(self, side: str, pair: int) -> Dict[str, torch.Tensor]:
        """One reply of pair ``pair`` (``side`` chosen or rejected), shifted: tokens, labels, loss mask, length."""
        ids = self._padded(f"{side}_input_ids", pair, self.pad_token_id)  # [s + 1]
        labels = self._padded(f"{side}_labels", pair, IGNORE_INDEX)[1:]  # [s] the next token's label
        trained = labels != IGNORE_INDEX
        length = min(len(self.files[f"{side}_input_ids"][pair]), self.seq_length)
        return {f"{side}_tokens": torch.from_numpy(ids[:-1].copy()),
                f"{side}_labels": torch.from_numpy(np.where(trained, labels, 0)),
                f"{side}_loss_mask": torch.from_numpy(trained.astype(np.float32)),
                f"{side}_length": torch.tensor(length, dtype=torch.int64)}

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        if not 0 <= idx < len(self):
            raise IndexError(f"sample {idx} out of range [0, {len(self)})")
        pair = int(self.order[idx])
        sample = {"pair": torch.tensor(pair, dtype=torch.int64)}
        for side in PAIR_SIDES:
            sample.update(self.side(side, pair))
        return sample


def collate_pairs(samples: List[Dict[str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
    """``b`` pairs -> one micro-batch of ``2b`` rows, the chosen replies first, then the rejected in the same order.

    ``tokens``, ``labels``, ``loss_mask`` ``[2b, s]``; ``lengths`` ``[2b]``; ``pair`` ``[b]``.
    """
    batch = {name: torch.stack([s[f"{side}_{name}"] for side in PAIR_SIDES for s in samples])
             for name in ("tokens", "labels", "loss_mask")}  # each [2b, s]
    batch["lengths"] = torch.stack([s[f"{side}_length"] for side in PAIR_SIDES for s in samples])  # [2b]
    batch["pair"] = torch.stack([s["pair"] for s in samples])  # [b]
    return batch
