"""The indexed dataset: byte format against the published layout, round trips, merge, and load-time checks."""
from __future__ import annotations

import os
import struct

import numpy as np
import pytest
import torch

from core.datasets.indexed_dataset import (
    IndexedDataset,
    IndexedDatasetBuilder,
    IndexedDatasetError,
    best_dtype,
    merge_datasets,
)

DOCS = [[[1, 2, 3]], [[4, 5], [6]], [[7, 8, 9, 10]]]  # documents made of sequences


def _expected_idx_bytes(dtype_code: int, itemsize: int, lengths, doc_indices) -> bytes:
    """The .idx as Megatron's format description lays it out, written independently with struct."""
    pointers, position = [], 0
    for length in lengths:
        pointers.append(position)
        position += length * itemsize
    header = b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", dtype_code)
    header += struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_indices))
    body = struct.pack(f"<{len(lengths)}i", *lengths) + struct.pack(f"<{len(pointers)}q", *pointers)
    return header + body + struct.pack(f"<{len(doc_indices)}q", *doc_indices)


def _build(prefix: str, dtype, docs=DOCS) -> None:
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype)
    for document in docs:
        for sequence in document:
            builder.add_item(torch.tensor(sequence))
        builder.end_document()
    builder.finalize(prefix + ".idx")


@pytest.mark.parametrize("dtype,code", [(np.uint16, 8), (np.int32, 4)])
def test_idx_bytes_match_published_format(tmp_path, dtype, code):
    prefix = str(tmp_path / "corpus")
    _build(prefix, dtype)
    itemsize = np.dtype(dtype).itemsize
    with open(prefix + ".idx", "rb") as stream:
        assert stream.read() == _expected_idx_bytes(code, itemsize, [3, 2, 1, 4], [0, 1, 3, 4])
    with open(prefix + ".bin", "rb") as stream:
        assert stream.read() == np.arange(1, 11, dtype=dtype).tobytes()


@pytest.mark.parametrize("dtype", [np.uint16, np.int32])
@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip(tmp_path, dtype, mmap):
    prefix = str(tmp_path / "corpus")
    _build(prefix, dtype)
    dataset = IndexedDataset(prefix, mmap=mmap)
    assert len(dataset) == 4 and dataset.dtype == dtype
    assert [s.tolist() for s in dataset[0:4]] == [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10]]
    assert dataset[-1].tolist() == [7, 8, 9, 10] and dataset[1].dtype == dtype
    assert dataset.get(3, offset=1, length=2).tolist() == [8, 9]
    assert dataset.get(3, offset=2).tolist() == [9, 10]
    assert dataset.sequence_lengths.tolist() == [3, 2, 1, 4]
    assert dataset.document_indices.tolist() == [0, 1, 3, 4]
    with pytest.raises(IndexError):
        dataset[4]
    with pytest.raises(IndexError):
        dataset.get(0, offset=2, length=2)


def test_add_document_and_large_values(tmp_path):
    prefix = str(tmp_path / "big")
    builder = IndexedDatasetBuilder(prefix + ".bin", best_dtype(150_000))
    builder.add_document(np.array([149_999, 0, 70_000]), lengths=[2, 1])
    builder.finalize(prefix + ".idx")
    dataset = IndexedDataset(prefix)
    assert dataset.dtype == np.int32 and dataset[0].tolist() == [149_999, 0] and dataset[1].tolist() == [70_000]
    assert dataset.document_indices.tolist() == [0, 2]
    assert best_dtype(32000) == np.uint16 and best_dtype(65500) == np.int32


def test_add_documents_writes_what_add_item_and_end_document_write(tmp_path):
    docs = [[[5, 6, 7]], [[8]], [[9, 10]]]  # one sequence each, as preprocess_data's pretraining chunks
    _build(str(tmp_path / "one_by_one"), np.uint16, docs)
    builder = IndexedDatasetBuilder(str(tmp_path / "bulk.bin"), np.uint16)
    builder.add_item([1, 2])  # a document before the bulk ones
    builder.end_document()
    builder.add_documents(np.array([5, 6, 7, 8, 9, 10], dtype=np.int32), np.array([3, 1, 2]))
    builder.finalize(str(tmp_path / "bulk.idx"))
    _build(str(tmp_path / "reference"), np.uint16, [[[1, 2]]] + docs)
    for suffix in (".bin", ".idx"):
        assert (tmp_path / ("bulk" + suffix)).read_bytes() == (tmp_path / ("reference" + suffix)).read_bytes()
    bad = IndexedDatasetBuilder(str(tmp_path / "bad.bin"), np.uint16)
    with pytest.raises(ValueError, match="sum to 3"):
        bad.add_documents([1, 2], [1, 2])
    bad.abort()


def test_merge(tmp_path):
    first, second, merged = (str(tmp_path / name) for name in ("a", "b", "merged"))
    _build(first, np.uint16)
    _build(second, np.uint16, docs=[[[11, 12]], [[13], [14, 15]]])
    merge_datasets([first, second], merged)
    dataset = IndexedDataset(merged)
    assert [s.tolist() for s in dataset[:]] == [[1, 2, 3], [4, 5], [6], [7, 8, 9, 10], [11, 12], [13], [14, 15]]
    assert dataset.document_indices.tolist() == [0, 1, 3, 4, 5, 7]
    with open(merged + ".idx", "rb") as stream:
        assert stream.read() == _expected_idx_bytes(8, 2, [3, 2, 1, 4, 2, 1, 2], [0, 1, 3, 4, 5, 7])


def test_truncated_bin_is_rejected(tmp_path):
    prefix = str(tmp_path / "corpus")
    _build(prefix, np.int32)
    with open(prefix + ".bin", "r+b") as stream:
        stream.truncate(os.path.getsize(prefix + ".bin") - 4)
    with pytest.raises(IndexedDatasetError, match=r"corpus\.bin.*truncated"):
        IndexedDataset(prefix)


def test_mismatching_idx_is_rejected(tmp_path):
    small, large = str(tmp_path / "small"), str(tmp_path / "large")
    _build(small, np.int32)
    _build(large, np.int32, docs=DOCS + [[[1, 2, 3, 4, 5]]])
    os.replace(large + ".idx", small + ".idx")  # an index from another corpus
    with pytest.raises(IndexedDatasetError, match=r"small\.bin"):
        IndexedDataset(small)


@pytest.mark.parametrize("corrupt,message", [
    (lambda raw: b"XXIDIDX\x00\x00" + raw[9:], "bad magic"),
    (lambda raw: raw[:9] + struct.pack("<Q", 2) + raw[17:], "version 2"),
    (lambda raw: raw[:17] + bytes([42]) + raw[18:], "dtype code 42"),
    (lambda raw: raw[:-8], "truncated or corrupt"),
    (lambda raw: raw[:34 + 16 + 8] + struct.pack("<q", 999) + raw[34 + 16 + 16:], "pointer 1"),
])
def test_corrupt_idx_is_rejected(tmp_path, corrupt, message):
    prefix = str(tmp_path / "corpus")
    _build(prefix, np.int32)
    with open(prefix + ".idx", "rb") as stream:
        raw = stream.read()
    with open(prefix + ".idx", "wb") as stream:
        stream.write(corrupt(raw))
    with pytest.raises(IndexedDatasetError, match=message) as info:
        IndexedDataset(prefix)
    assert "corpus.idx" in str(info.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(IndexedDatasetError, match=r"nothing\.idx: no such file"):
        IndexedDataset(str(tmp_path / "nothing"))


def test_failed_build_leaves_no_index(tmp_path):
    prefix = str(tmp_path / "broken")
    with pytest.raises(RuntimeError):
        with IndexedDatasetBuilder(prefix + ".bin", np.uint16) as builder:
            builder.add_item([1, 2, 3])
            builder.end_document()
            raise RuntimeError("tokenizer crashed")
    assert os.listdir(tmp_path) == []
    # without the context manager: the partial .bin stays under its temporary name, no .idx appears
    builder = IndexedDatasetBuilder(prefix + ".bin", np.uint16)
    builder.add_item([1, 2, 3])
    assert not os.path.exists(prefix + ".idx") and not os.path.exists(prefix + ".bin")
    assert not IndexedDataset.exists(prefix)
    builder.abort()
