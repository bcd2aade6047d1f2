"""Fine-tuning dataset over the packed files written by ``preprocess_data.py`` (instruction handlers).

Files, per ``prefix`` (see ``mindspeed_llm/data/handlers.py``), each a Megatron indexed dataset
whose item ``i`` is training sequence ``i`` (one item = one document):

- ``{prefix}_packed_input_ids_document``: token ids;
- ``{prefix}_packed_labels_document``: labels *aligned* with the input ids (not shifted), -100
  (``IGNORE_INDEX``) where the token is not trained (prompt, system text, user turns);
- ``{prefix}_packed_attention_mask_document``: per-token document ids, 1..k for the k samples
  packed into the sequence (1 everywhere when unpacked); 0 means padding, never stored on disk.

A sample is one stored sequence, truncated to ``seq_length + 1`` tokens and padded to that
length, then shifted for next-token prediction. It is returned as (each ``[seq_length]``):

- ``tokens`` int64: input ids ``[0, s)``; padding is ``pad_token_id``;
- ``labels`` int64: labels ``[1, s + 1)`` with ignored positions replaced by 0 (masked below);
- ``loss_mask`` float32: 1 where the label is trained and belongs to the same packed document as
  its input token (a document never predicts the next one's first token), 0 elsewhere;
- ``position_ids`` int64: positions restarting at 0 at each document boundary (0 on padding);
- ``document_ids`` int64: the document id of each input token (0 on padding), for a
  block-diagonal attention mask.

Sample order: each epoch a permutation of the sequences from ``numpy.random.RandomState(seed)``,
as many epochs as ``num_samples`` needs (``sequence_ids`` restricts the sequences drawn from to a
split's range, e.g. ``--split``'s validation part; by default every sequence); with ``full_shuffle`` (MindSpeed's
``--full-shuffle-instruction-dataset``) the epochs' concatenation is then shuffled as a whole, so
epochs mix. Nothing depends on the parallel layout.

``real_length(document_ids)`` is the number of leading non-padding tokens of a sample, for
batches padded only as far as they need (``--no-pad-to-seq-lengths``).
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
import torch

from core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetError, check_indexed_files

IGNORE_INDEX = -100
PACKED_FILES = ("input_ids", "attention_mask", "labels")


def packed_prefix(prefix: str, name: str) -> str:
    return f"{prefix}_packed_{name}_document"


def position_ids_from_documents(document_ids: np.ndarray) -> np.ndarray:
    """Positions ``[n]`` that restart at 0 wherever the document id changes; 0 on padding (id 0)."""
    n = len(document_ids)
    starts = np.ones(n, dtype=bool)
    starts[1:] = document_ids[1:] != document_ids[:-1]  # [n] True at each document's first token
    start_of = np.maximum.accumulate(np.where(starts, np.arange(n), 0))  # [n] index of the document start
    positions = np.arange(n) - start_of
    positions[document_ids == 0] = 0
    return positions


def real_length(document_ids: torch.Tensor) -> int:
    """Tokens up to the last non-padding one of ``document_ids`` ``[b, s]`` (0 marks padding), over the batch."""
    used = (document_ids != 0).any(dim=0).nonzero()  # [k, 1] positions some sample uses
    return int(used[-1]) + 1 if len(used) else 0


def checked_sequence_ids(sequence_ids: Optional[Sequence[int]], count: int, path: str) -> np.ndarray:
    """``sequence_ids`` (default: all ``count``) as int64 ``[n]``; none, or one outside ``[0, count)``, is refused."""
    ids = np.arange(count, dtype=np.int64) if sequence_ids is None else np.asarray(sequence_ids, dtype=np.int64)
    if len(ids) == 0:
        raise IndexedDatasetError(f"{path}: no sequences to draw from")
    if ids.min() < 0 or ids.max() >= count:
        raise IndexedDatasetError(f"{path}: sequence ids must lie in [0, {count}), got [{ids.min()}, {ids.max()}]")
    return ids


def check_packed_files(prefix: str, names: Sequence[str]) -> None:
    """Before any process group: every ``{prefix}_packed_{name}_document`` is a sound ``.bin/.idx`` pair
    (``check_indexed_files``: headers and sizes) and all hold the same number of sequences (IndexedDatasetError)."""
    counts = {name: check_indexed_files(packed_prefix(prefix, name)).sequence_count for name in names}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{name} {count}" for name, count in counts.items())
        raise IndexedDatasetError(f"{prefix}_packed_*: the packed files hold different numbers of sequences "
                                  f"({listed}); they come from different runs: run preprocess_data.py again")


class SFTPackedDataset(torch.utils.data.Dataset):
    """Packed instruction-tuning sequences, shifted and masked for the training loop."""

    def __init__(self, prefix: str, seq_length: int, num_samples: Optional[int] = None, seed: int = 1234,
                 pad_token_id: int = 0, shuffle: bool = True, mmap: bool = True, full_shuffle: bool = False,
                 sequence_ids: Optional[Sequence[int]] = None) -> None:
        self.prefix, self.seq_length, self.pad_token_id = prefix, seq_length, pad_token_id
        self.files = {name: IndexedDataset(packed_prefix(prefix, name), mmap=mmap) for name in PACKED_FILES}
        self._check_aligned()
        self.sequence_ids = checked_sequence_ids(sequence_ids, len(self.files["input_ids"]),
                                                 packed_prefix(prefix, "input_ids"))  # [n] drawn from
        self.num_samples = len(self.sequence_ids) if num_samples is None else num_samples
        self.order = self._build_order(seed, shuffle, full_shuffle)  # [num_samples] sequence ids

    def _check_aligned(self) -> None:
        reference = self.files["input_ids"].sequence_lengths
        for name in PACKED_FILES[1:]:
            if not np.array_equal(self.files[name].sequence_lengths, reference):
                raise IndexedDatasetError(f"{packed_prefix(self.prefix, name)}: its sequence lengths differ from "
                                          f"{packed_prefix(self.prefix, 'input_ids')}; the packed files do not match")

    def _build_order(self, seed: int, shuffle: bool, full_shuffle: bool) -> np.ndarray:
        rng = np.random.RandomState(seed)
        epochs = -(-self.num_samples // len(self.sequence_ids))
        order = []
        for _ in range(epochs):
            epoch = self.sequence_ids.copy()
            if shuffle:
                rng.shuffle(epoch)
            order.append(epoch)
        order = np.concatenate(order)  # [epochs * count]
        if full_shuffle:
            rng.shuffle(order)
        return order[:self.num_samples]

    def __len__(self) -> int:
        return self.num_samples

    def _padded(self, name: str, sequence: int, fill: int) -> np.ndarray:
        values = np.asarray(self.files[name][sequence][:self.seq_length + 1], dtype=np.int64)
        out = np.full(self.seq_length + 1, fill, dtype=np.int64)  # [s + 1]
        out[:len(values)] = values
        return out

    def __getitem__(self, idx: int) -> Dict[str, torch.Tensor]:
        if not 0 <= idx < len(self):
            raise IndexError(f"sample {idx} out of range [0, {len(self)})")
        sequence = int(self.order[idx])
        ids = self._padded("input_ids", sequence, self.pad_token_id)  # [s + 1]
        labels = self._padded("labels", sequence, IGNORE_INDEX)  # [s + 1]
        documents = self._padded("attention_mask", sequence, 0)  # [s + 1]
        targets = labels[1:]  # [s] label of the next token
        trained = (targets != IGNORE_INDEX) & (documents[1:] == documents[:-1]) & (documents[:-1] != 0)
        return {
            "tokens": torch.from_numpy(ids[:-1].copy()),
            "labels": torch.from_numpy(np.where(trained, targets, 0)),
            "loss_mask": torch.from_numpy(trained.astype(np.float32)),
            "position_ids": torch.from_numpy(position_ids_from_documents(documents[:-1])),
            "document_ids": torch.from_numpy(documents[:-1].copy()),
        }
