"""Python entry points to the C++ index builders (``csrc/helpers.cpp``) and their NumPy references.

The C++ extension ``core.datasets.helpers_cpp`` is compiled by ``pip install -e .`` (or
``python setup.py build_ext --inplace``). The datasets call the wrappers below, which allocate
the outputs and call the extension; each has a NumPy reference with the same result, used by
the tests and by ``bench/build_sample_idx.py``:

- :func:`build_sample_idx` / :func:`build_sample_idx_reference`: ``[num_samples + 1, 2]``
  (position in the document index, token offset) where each sample starts.
- :func:`build_blending_indices` / :func:`build_blending_indices_reference`: for each blended
  sample, the dataset it comes from and its index there (greedy: the dataset that lags its
  weight the most).
- :func:`build_exhaustive_blending_indices` / ``..._reference``: the same rule, drawing every
  sample of every dataset exactly once.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Optional, Sequence, Tuple

import numpy as np

BUILD_HINT = ("the C++ extension core.datasets.helpers_cpp is not built; from the repository root run "
              "`pip install -e . --no-build-isolation` or `python setup.py build_ext --inplace`")
_INT32_MAX = np.iinfo(np.int32).max
_extension: Optional[ModuleType] = None


def extension() -> ModuleType:
    """The compiled helpers, imported on first use; a clear error says how to build them."""
    global _extension
    if _extension is None:
        try:
            _extension = importlib.import_module("core.datasets.helpers_cpp")
        except ImportError as error:
            raise ImportError(f"{BUILD_HINT} ({error})") from error
        if not hasattr(_extension, "build_blending_indices"):
            raise ImportError(f"core.datasets.helpers_cpp is out of date (no build_blending_indices); "
                              f"rebuild it: {BUILD_HINT.split('; ', 1)[1]}")
    return _extension


def _num_samples(num_epochs: int, tokens_per_epoch: int, seq_length: int, drop_last: bool, extra: int) -> int:
    tokens = num_epochs * tokens_per_epoch - extra
    return tokens // seq_length if drop_last else -(-tokens // seq_length)


# ---- sample index --------------------------------------------------------------------------------


def build_sample_idx(sizes: np.ndarray, document_index: np.ndarray, seq_length: int, num_epochs: int,
                     tokens_per_epoch: int, drop_last_partial_sequence: bool = True,
                     add_extra_token_to_sequence: int = 1) -> np.ndarray:
    """Sample starts ``[num_samples + 1, 2]`` via the C++ helper (int32 when it fits, else int64)."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int32)  # [sequences]
    document_index = np.ascontiguousarray(document_index, dtype=np.int32)  # [documents x epochs]
    fits_int32 = len(document_index) < _INT32_MAX and (sizes.size == 0 or int(sizes.max()) < _INT32_MAX)
    build = extension().build_sample_idx_int32 if fits_int32 else extension().build_sample_idx_int64
    return build(sizes, document_index, seq_length, num_epochs, tokens_per_epoch,
                 drop_last_partial_sequence, add_extra_token_to_sequence)


def build_sample_idx_reference(sizes: np.ndarray, document_index: np.ndarray, seq_length: int, num_epochs: int,
                               tokens_per_epoch: int, drop_last_partial_sequence: bool = True,
                               add_extra_token_to_sequence: int = 1) -> np.ndarray:
    """Vectorised NumPy version of :func:`build_sample_idx` (int64 result).

    Sample ``i`` (``i >= 1``) starts at stream position ``p = i * seq_length``. The walk in C++
    records it in the document holding the previous sample's last token, ``q = p + extra - 1``,
    at offset ``p - start_of_that_document``; past the end of the stream (the partial last
    sample) it records the last document at offset ``size - extra``.
    """
    extra = add_extra_token_to_sequence
    num_samples = _num_samples(num_epochs, tokens_per_epoch, seq_length, drop_last_partial_sequence, extra)
    lengths = np.asarray(sizes, dtype=np.int64)[np.asarray(document_index, dtype=np.int64)]  # [docs]
    starts = np.zeros(len(lengths), dtype=np.int64)  # [docs] stream position of each document
    np.cumsum(lengths[:-1], out=starts[1:])
    positions = np.arange(1, num_samples + 1, dtype=np.int64) * seq_length  # [n]
    last_tokens = positions + extra - 1
    doc_pos = np.searchsorted(starts, last_tokens, side="right") - 1  # [n]
    offsets = positions - starts[doc_pos]
    past_end = last_tokens >= starts[-1] + lengths[-1] if len(lengths) else np.zeros(0, bool)
    doc_pos[past_end] = len(lengths) - 1
    offsets[past_end] = lengths[-1] - extra if len(lengths) else 0
    result = np.zeros((num_samples + 1, 2), dtype=np.int64)  # [n + 1, 2]
    result[1:, 0], result[1:, 1] = doc_pos, offsets
    return result


# ---- blending ------------------------------------------------------------------------------------


def _blending_outputs(size: int, num_datasets: int) -> Tuple[np.ndarray, np.ndarray]:
    if num_datasets > np.iinfo(np.int16).max:
        raise ValueError(f"at most {np.iinfo(np.int16).max} datasets can be blended, got {num_datasets}")
    return np.zeros(size, dtype=np.int16), np.zeros(size, dtype=np.int64)


def build_blending_indices(weights: Sequence[float], size: int,
                           verbose: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """(dataset of each sample ``[size]`` int16, index of the sample in that dataset ``[size]`` int64)."""
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    dataset_index, dataset_sample_index = _blending_outputs(size, len(weights))
    extension().build_blending_indices(dataset_index, dataset_sample_index, weights, len(weights), size, verbose)
    return dataset_index, dataset_sample_index


def build_blending_indices_reference(weights: Sequence[float], size: int) -> Tuple[np.ndarray, np.ndarray]:
    weights = np.asarray(weights, dtype=np.float64)
    dataset_index, dataset_sample_index = _blending_outputs(size, len(weights))
    counts = np.zeros(len(weights), dtype=np.int64)
    for step in range(size):
        errors = weights * max(float(step), 1.0) - counts  # how far each dataset lags its weight
        best = int(np.argmax(errors))  # first maximum, as the C++ strict '>'
        dataset_index[step], dataset_sample_index[step] = best, counts[best]
        counts[best] += 1
    return dataset_index, dataset_sample_index


def build_exhaustive_blending_indices(sizes: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """Blend every sample of every dataset once, in proportion to ``sizes``: arrays of length ``sum(sizes)``."""
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    dataset_index, dataset_sample_index = _blending_outputs(int(sizes.sum()), len(sizes))
    extension().build_exhaustive_blending_indices(dataset_index, dataset_sample_index, sizes, len(sizes))
    return dataset_index, dataset_sample_index


def build_exhaustive_blending_indices_reference(sizes: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    weights = sizes / max(total, 1)
    dataset_index, dataset_sample_index = _blending_outputs(total, len(sizes))
    counts = np.zeros(len(sizes), dtype=np.int64)
    for step in range(total):
        errors = weights * max(float(step), 1.0) - counts
        errors[counts >= sizes] = -np.inf  # spent datasets no longer compete
        best = int(np.argmax(errors))
        dataset_index[step], dataset_sample_index[step] = best, counts[best]
        counts[best] += 1
    return dataset_index, dataset_sample_index
