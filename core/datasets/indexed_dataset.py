"""Megatron's indexed dataset: token sequences in a ``.bin`` file, their layout in an ``.idx`` file.

The format is byte-compatible with Megatron-LM (``megatron/core/datasets/indexed_dataset.py``),
so corpora prepared by either code base load in the other.

``{prefix}.bin`` holds the tokens of every sequence back to back, in the dtype named
by the index, with no header.

``{prefix}.idx`` (all integers little-endian)::

    9 bytes   magic b"MMIDIDX\\x00\\x00"
    <Q        version, 1
    <B        dtype code (see ``DTYPE_CODES``: 1 uint8, 2 int8, 3 int16, 4 int32,
              5 int64, 6 float64, 7 float32, 8 uint16)
    <Q        S, the number of sequences
    <Q        D, the number of document-index entries (documents + 1)
    int32[S]  sequence lengths, in tokens
    int64[S]  sequence pointers, byte offsets into the .bin (exclusive prefix sums)
    int64[D]  document indices: document d is sequences [doc[d], doc[d + 1]); doc[0] = 0

Writing: :class:`IndexedDatasetBuilder` writes the ``.bin`` under a temporary name and
renames it at :meth:`~IndexedDatasetBuilder.finalize`, after which the ``.idx`` is written
(again to a temporary name, renamed last). A run that fails midway leaves no ``.idx``
and therefore nothing that looks like a valid dataset.

Reading: :class:`IndexedDataset` memory-maps both files and checks at load that they
agree (magic, version, dtype, sizes, pointers, document indices, ``.bin`` size). Any
mismatch raises :class:`IndexedDatasetError` naming the file, never garbage tokens.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
from dataclasses import dataclass
from typing import BinaryIO, Dict, Iterable, List, Optional, Sequence, Type, Union

import numpy as np

SCAN_CHUNK_TOKENS = 64 * 2**20  # tokens per read of scan_max_token_id: bounded memory on any corpus size
_MAGIC = b"MMIDIDX\x00\x00"
_VERSION = 1
_HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document count
_TMP_SUFFIX = ".tmp"

DTYPE_CODES: Dict[int, Type[np.number]] = {
    1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32,
    5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16,
}
_CODE_OF_DTYPE = {np.dtype(dtype): code for code, dtype in DTYPE_CODES.items()}

ArrayLike = Union[np.ndarray, Sequence[int], "torch.Tensor"]  # noqa: F821 (torch is optional here)


class IndexedDatasetError(ValueError):
    """A ``.bin``/``.idx`` pair is missing, malformed or inconsistent."""


def get_idx_path(path_prefix: str) -> str:
    return path_prefix + ".idx"


def get_bin_path(path_prefix: str) -> str:
    return path_prefix + ".bin"


def best_dtype(vocab_size: Optional[int]) -> Type[np.number]:
    """The smallest token dtype for a vocabulary: uint16 below 65500 tokens, else int32 (as Megatron)."""
    if vocab_size is not None and vocab_size < 65500:
        return np.uint16
    return np.int32


def dtype_code(dtype: Union[type, np.dtype]) -> int:
    try:
        return _CODE_OF_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise IndexedDatasetError(f"dtype {np.dtype(dtype)} has no code in the indexed-dataset format; "
                                  f"use one of {sorted(str(np.dtype(d)) for d in DTYPE_CODES.values())}") from None


def _as_numpy(item: ArrayLike, dtype: Type[np.number]) -> np.ndarray:
    if hasattr(item, "detach"):  # torch.Tensor
        item = item.detach().cpu().numpy()
    return np.ascontiguousarray(np.asarray(item).reshape(-1), dtype=dtype)


# ---- the index ---------------------------------------------------------------------------------


def write_index(idx_file: BinaryIO, dtype: Type[np.number], sequence_lengths: Sequence[int],
                document_indices: Sequence[int]) -> None:
    """Write an ``.idx`` body to an open file: header, lengths, pointers, document indices."""
    lengths = np.asarray(sequence_lengths, dtype=np.int32)  # [S]
    itemsize = np.dtype(dtype).itemsize
    pointers = np.zeros(len(lengths), dtype=np.int64)  # [S] byte offsets
    if len(lengths) > 1:
        np.cumsum(lengths[:-1].astype(np.int64) * itemsize, out=pointers[1:])
    documents = np.asarray(document_indices, dtype=np.int64)  # [D]
    idx_file.write(_HEADER.pack(_MAGIC, _VERSION, dtype_code(dtype), len(lengths), len(documents)))
    idx_file.write(lengths.tobytes(order="C"))
    idx_file.write(pointers.tobytes(order="C"))
    idx_file.write(documents.tobytes(order="C"))


@dataclass(frozen=True)
class IndexHeader:
    """The fixed-size head of an ``.idx`` file, checked against the file's size."""
    dtype: Type[np.number]
    sequence_count: int
    document_count: int
    size: int  # bytes of the .idx


def read_index_header(idx_path: str) -> IndexHeader:
    """The header of ``idx_path`` (27 bytes read): magic, version, dtype code and the size its counts imply."""
    size = os.path.getsize(idx_path)
    if size < _HEADER.size:
        raise IndexedDatasetError(f"{idx_path}: {size} bytes, shorter than the {_HEADER.size}-byte header; "
                                  "the file is truncated or not an indexed-dataset index")
    with open(idx_path, "rb") as stream:
        magic, version, code, sequence_count, document_count = _HEADER.unpack(stream.read(_HEADER.size))
    _check_header(idx_path, magic, version, code, sequence_count, document_count, size)
    return IndexHeader(DTYPE_CODES[code], sequence_count, document_count, size)


def _check_header(path: str, magic: bytes, version: int, code: int, sequence_count: int,
                  document_count: int, size: int) -> None:
    if magic != _MAGIC:
        raise IndexedDatasetError(f"{path}: bad magic {magic!r} (expected {_MAGIC!r}); not a Megatron "
                                  "MMIDIDX index (an old 'lazy'/'cached' index needs re-preprocessing)")
    if version != _VERSION:
        raise IndexedDatasetError(f"{path}: index version {version}, only version {_VERSION} is supported; "
                                  "write it again with preprocess_data.py")
    if code not in DTYPE_CODES:
        raise IndexedDatasetError(f"{path}: unknown dtype code {code} (known: {sorted(DTYPE_CODES)})")
    expected = _HEADER.size + sequence_count * (4 + 8) + document_count * 8
    if size != expected:
        raise IndexedDatasetError(
            f"{path}: {size} bytes, but a header of {sequence_count} sequences and {document_count} "
            f"document entries needs {expected}; the index is truncated or corrupt")
    if document_count < 1:
        raise IndexedDatasetError(f"{path}: no document-index entries (at least the leading 0 is required)")


def _bin_size_error(bin_path: str, bin_size: int, idx_path: str, expected: int,
                    dtype: Type[np.number]) -> IndexedDatasetError:
    """The ``.bin`` is not the size its ``.idx`` describes: truncated, or the pair does not belong together."""
    tokens = expected // np.dtype(dtype).itemsize
    state = "truncated" if bin_size < expected else "longer than its index"
    return IndexedDatasetError(
        f"{bin_path}: {bin_size} bytes, but its index {idx_path} describes {expected} bytes ({tokens} tokens of "
        f"{np.dtype(dtype)}); the .bin is {state} or the .idx belongs to another corpus (or dtype): "
        "run preprocess_data.py again for this prefix")


def check_indexed_files(path_prefix: str) -> IndexHeader:
    """A cheap check of ``{path_prefix}.bin/.idx`` before training: both files exist, the index header is sound and
    the ``.bin`` has the size the index gives it (the last sequence's pointer + its length x the item size).

    Reads the 27-byte header and 12 bytes near the index's middle; never the token data or the whole index.
    :class:`IndexedDataset` checks every pointer and document boundary when it opens the pair.
    """
    idx_path, bin_path = get_idx_path(path_prefix), get_bin_path(path_prefix)
    _check_files_exist(path_prefix)
    header = read_index_header(idx_path)
    expected = 0
    if header.sequence_count:
        last = header.sequence_count - 1
        with open(idx_path, "rb") as stream:
            stream.seek(_HEADER.size + 4 * last)
            (length,) = struct.unpack("<i", stream.read(4))  # the last sequence's length
            stream.seek(_HEADER.size + 4 * header.sequence_count + 8 * last)
            (pointer,) = struct.unpack("<q", stream.read(8))  # its byte offset
        if length < 0 or pointer < 0:
            raise IndexedDatasetError(f"{idx_path}: the last sequence has length {length} at byte {pointer}; "
                                      "the index is corrupt: run preprocess_data.py again for this prefix")
        expected = pointer + length * np.dtype(header.dtype).itemsize
    bin_size = os.path.getsize(bin_path)
    if bin_size != expected:
        raise _bin_size_error(bin_path, bin_size, idx_path, expected, header.dtype)
    return header


def _check_files_exist(path_prefix: str) -> None:
    for path in (get_idx_path(path_prefix), get_bin_path(path_prefix)):
        if not os.path.isfile(path):
            raise IndexedDatasetError(f"{path}: no such file; give the prefix of a .bin/.idx pair ({path_prefix!r} "
                                      "was given) or run preprocess_data.py to create it")


class _Index:
    """The parsed, validated ``.idx`` of one dataset (arrays are views of a memory map)."""

    def __init__(self, idx_path: str, bin_size: int, bin_path: str) -> None:
        self.path = idx_path
        header = read_index_header(idx_path)
        self.dtype, size = header.dtype, header.size
        sequence_count, document_count = header.sequence_count, header.document_count
        self.sequence_count, self.document_count = sequence_count, document_count
        buffer = np.memmap(idx_path, mode="r", order="C") if size > _HEADER.size else np.zeros(0, np.uint8)
        offset = _HEADER.size
        self.sequence_lengths = np.frombuffer(buffer, np.int32, sequence_count, offset)  # [S]
        offset += sequence_count * 4
        self.sequence_pointers = np.frombuffer(buffer, np.int64, sequence_count, offset)  # [S]
        offset += sequence_count * 8
        self.document_indices = np.frombuffer(buffer, np.int64, document_count, offset)  # [D]
        self._check_arrays(bin_size, bin_path)

    def _check_arrays(self, bin_size: int, bin_path: str) -> None:
        path, lengths, itemsize = self.path, self.sequence_lengths, np.dtype(self.dtype).itemsize
        if lengths.size and int(lengths.min()) < 0:
            raise IndexedDatasetError(f"{path}: negative sequence length")
        expected_pointers = np.zeros(lengths.size, dtype=np.int64)
        if lengths.size > 1:
            np.cumsum(lengths[:-1].astype(np.int64) * itemsize, out=expected_pointers[1:])
        if not np.array_equal(expected_pointers, self.sequence_pointers):
            bad = int(np.argmax(expected_pointers != self.sequence_pointers))
            raise IndexedDatasetError(f"{path}: sequence pointer {bad} is {int(self.sequence_pointers[bad])}, "
                                      f"expected {int(expected_pointers[bad])} from the lengths; index corrupt")
        docs = self.document_indices
        if docs[0] != 0 or docs[-1] > lengths.size or (docs.size > 1 and np.any(np.diff(docs) < 0)):
            raise IndexedDatasetError(f"{path}: document indices must rise from 0 to at most the sequence "
                                      f"count {lengths.size}; got first {int(docs[0])}, last {int(docs[-1])}")
        total = int(lengths.sum(dtype=np.int64)) * itemsize
        if total != bin_size:
            raise _bin_size_error(bin_path, bin_size, path, total, self.dtype)


# ---- the reader --------------------------------------------------------------------------------


class IndexedDataset:
    """Read-only view of ``{path_prefix}.bin/.idx``; item ``i`` is sequence ``i`` as a NumPy array."""

    max_token_id: Optional[int] = None  # the .bin's largest id, once scanned (core/datasets/gpt_dataset.py)

    def __init__(self, path_prefix: str, mmap: bool = True) -> None:
        self.path_prefix, self.mmap = path_prefix, mmap
        idx_path, bin_path = get_idx_path(path_prefix), get_bin_path(path_prefix)
        _check_files_exist(path_prefix)
        bin_size = os.path.getsize(bin_path)
        self.index = _Index(idx_path, bin_size, bin_path)
        self.dtype = self.index.dtype
        self._tokens = self._open_bin(bin_path, bin_size)  # [total tokens]

    def _open_bin(self, bin_path: str, bin_size: int) -> np.ndarray:
        if bin_size == 0:
            return np.zeros(0, dtype=self.dtype)
        if self.mmap:
            return np.memmap(bin_path, dtype=self.dtype, mode="r", order="C")
        return np.fromfile(bin_path, dtype=self.dtype)

    @staticmethod
    def exists(path_prefix: str) -> bool:
        return os.path.isfile(get_idx_path(path_prefix)) and os.path.isfile(get_bin_path(path_prefix))

    @property
    def sequence_lengths(self) -> np.ndarray:
        return self.index.sequence_lengths  # [S] int32

    @functools.cached_property
    def fingerprint(self) -> str:
        """md5 of the sequence lengths and document boundaries (the ``.idx``'s content), computed once: what the
        sample indices and the cached largest id are keyed on."""
        digest = hashlib.md5()
        for array in (self.sequence_lengths, self.document_indices):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()

    @property
    def sequence_pointers(self) -> np.ndarray:
        return self.index.sequence_pointers  # [S] int64 byte offsets

    @property
    def document_indices(self) -> np.ndarray:
        return self.index.document_indices  # [documents + 1] int64

    def __len__(self) -> int:
        return self.index.sequence_count

    def _start(self, idx: int) -> int:
        return int(self.index.sequence_pointers[idx]) // np.dtype(self.dtype).itemsize

    def _check(self, idx: int) -> int:
        if not -len(self) <= idx < len(self):
            raise IndexError(f"sequence {idx} out of range for {len(self)} sequences in {self.path_prefix}")
        return idx % len(self)

    def __getitem__(self, idx: Union[int, np.integer, slice]) -> Union[np.ndarray, List[np.ndarray]]:
        if isinstance(idx, (int, np.integer)):
            idx = self._check(int(idx))
            start = self._start(idx)
            return self._tokens[start:start + int(self.sequence_lengths[idx])]
        if isinstance(idx, slice):
            return [self[i] for i in range(*idx.indices(len(self)))]
        raise TypeError(f"indexed dataset indices must be int or slice, not {type(idx).__name__}")

    def get(self, idx: int, offset: int = 0, length: Optional[int] = None) -> np.ndarray:
        """Tokens ``[offset, offset + length)`` of sequence ``idx`` (to its end when ``length`` is None)."""
        idx = self._check(int(idx))
        size = int(self.sequence_lengths[idx])
        length = size - offset if length is None else length
        if offset < 0 or length < 0 or offset + length > size:
            raise IndexError(f"tokens [{offset}, {offset + length}) outside sequence {idx} of length {size}")
        start = self._start(idx) + offset
        return self._tokens[start:start + length]

    def __getstate__(self) -> dict:
        return {"path_prefix": self.path_prefix, "mmap": self.mmap}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path_prefix"], state["mmap"])


def scan_max_token_id(dataset: IndexedDataset, chunk_tokens: int = SCAN_CHUNK_TOKENS,
                      show_progress: bool = False) -> int:
    """The largest token id in ``dataset``'s ``.bin`` (-1 when it is empty): the whole file read once, ``chunk_tokens``
    at a time through a memory map of that chunk alone (so memory stays bounded), with a tqdm bar when
    ``show_progress`` and the file spans several chunks."""
    bin_path, dtype = get_bin_path(dataset.path_prefix), np.dtype(dataset.dtype)
    total = os.path.getsize(bin_path) // dtype.itemsize
    bar = None
    if show_progress and total > chunk_tokens:
        from tqdm import tqdm
        bar = tqdm(total=total, unit="tok", unit_scale=True, desc=f"largest token id of {bin_path}")
    largest = -1
    for start in range(0, total, chunk_tokens):
        count = min(chunk_tokens, total - start)
        chunk = np.memmap(bin_path, dtype=dtype, mode="r", offset=start * dtype.itemsize, shape=(count,))  # [count]
        largest = max(largest, int(chunk.max()))
        del chunk  # unmapped: its pages leave this process
        if bar is not None:
            bar.update(count)
    if bar is not None:
        bar.close()
    return largest


# ---- the writer --------------------------------------------------------------------------------


class IndexedDatasetBuilder:
    """Append sequences to ``bin_path`` (via a temporary file) and write the ``.idx`` at :meth:`finalize`.

    Usable as a context manager: leaving the ``with`` block by an exception removes the
    temporary file, so nothing is left behind.
    """

    def __init__(self, bin_path: str, dtype: Type[np.number] = np.int32) -> None:
        dtype_code(dtype)  # reject unsupported dtypes early
        self.bin_path, self.dtype = bin_path, np.dtype(dtype).type
        self._tmp_bin_path = bin_path + _TMP_SUFFIX
        self._bin = open(self._tmp_bin_path, "wb")
        self.sequence_lengths: List[int] = []
        self.document_indices: List[int] = [0]

    def add_item(self, tensor: ArrayLike) -> None:
        """Append one sequence."""
        array = _as_numpy(tensor, self.dtype)
        self._bin.write(array.tobytes(order="C"))
        self.sequence_lengths.append(int(array.size))

    def add_document(self, tensor: ArrayLike, lengths: Iterable[int]) -> None:
        """Append one document made of sequences of the given ``lengths`` (which sum to its size)."""
        array = _as_numpy(tensor, self.dtype)
        lengths = [int(length) for length in lengths]
        if sum(lengths) != array.size:
            raise ValueError(f"sequence lengths sum to {sum(lengths)}, the document has {array.size} tokens")
        self._bin.write(array.tobytes(order="C"))
        self.sequence_lengths.extend(lengths)
        self.end_document()

    def add_documents(self, tensor: ArrayLike, lengths: Iterable[int]) -> None:
        """Append consecutive documents of one sequence each, of the given ``lengths`` (which sum to its size):
        ``add_item`` + ``end_document`` per length, in one write."""
        array = _as_numpy(tensor, self.dtype)
        lengths = [int(length) for length in lengths]
        if sum(lengths) != array.size:
            raise ValueError(f"sequence lengths sum to {sum(lengths)}, the documents have {array.size} tokens")
        self._bin.write(array.tobytes(order="C"))
        first = len(self.sequence_lengths)
        self.sequence_lengths.extend(lengths)
        self.document_indices.extend(range(first + 1, first + len(lengths) + 1))

    def end_document(self) -> None:
        """Close the current document: the sequences added since the last call form one document."""
        self.document_indices.append(len(self.sequence_lengths))

    def add_index(self, path_prefix: str) -> None:
        """Append every sequence and document of an existing dataset (merge)."""
        other = IndexedDataset(path_prefix)
        if np.dtype(other.dtype) != np.dtype(self.dtype):
            raise IndexedDatasetError(f"{get_idx_path(path_prefix)}: dtype {np.dtype(other.dtype)} differs from "
                                      f"the builder's {np.dtype(self.dtype)}; cannot merge")
        offset = len(self.sequence_lengths)
        self.sequence_lengths.extend(other.sequence_lengths.tolist())
        self.document_indices.extend((other.document_indices[1:] + offset).tolist())
        with open(get_bin_path(path_prefix), "rb") as source:
            shutil.copyfileobj(source, self._bin)

    def finalize(self, idx_path: str) -> None:
        """Close the ``.bin``, rename it into place, then write and rename the ``.idx`` (last)."""
        if self.document_indices[-1] != len(self.sequence_lengths):
            self.end_document()  # sequences after the last end_document() form a final document
        self._bin.close()
        os.replace(self._tmp_bin_path, self.bin_path)
        tmp_idx_path = idx_path + _TMP_SUFFIX
        try:
            with open(tmp_idx_path, "wb") as idx_file:
                write_index(idx_file, self.dtype, self.sequence_lengths, self.document_indices)
            os.replace(tmp_idx_path, idx_path)
        finally:
            if os.path.exists(tmp_idx_path):
                os.remove(tmp_idx_path)

    def abort(self) -> None:
        """Discard everything written so far."""
        if not self._bin.closed:
            self._bin.close()
        if os.path.exists(self._tmp_bin_path):
            os.remove(self._tmp_bin_path)

    def __enter__(self) -> "IndexedDatasetBuilder":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()


def merge_datasets(prefixes: Sequence[str], out_prefix: str) -> None:
    """Concatenate datasets (same dtype) into ``{out_prefix}.bin/.idx``."""
    if not prefixes:
        raise ValueError("merge_datasets needs at least one input prefix")
    dtype = IndexedDataset(prefixes[0]).dtype
    with IndexedDatasetBuilder(get_bin_path(out_prefix), dtype) as builder:
        for prefix in prefixes:
            builder.add_index(prefix)
        builder.finalize(get_idx_path(out_prefix))
