"""The C++ index builders equal their NumPy references (sample index, blending, exhaustive blending)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from core.datasets import helpers


def _random_case(rng: np.random.Generator, zero_length_docs: bool):
    num_docs = int(rng.integers(1, 40))
    sizes = rng.integers(0 if zero_length_docs else 1, 80, num_docs).astype(np.int32)
    sizes[0] = max(sizes[0], 2)
    num_epochs = int(rng.integers(1, 9))
    document_index = np.concatenate([rng.permutation(num_docs) for _ in range(num_epochs)]).astype(np.int32)
    return sizes, document_index, num_epochs, int(sizes.sum())


@pytest.mark.parametrize("extra", [1, 0])
@pytest.mark.parametrize("drop_last", [True, False])
def test_sample_idx_matches_reference(extra, drop_last):
    rng = np.random.default_rng(extra * 2 + drop_last)
    for trial in range(150):
        sizes, document_index, num_epochs, tokens_per_epoch = _random_case(rng, zero_length_docs=trial % 2 == 0)
        seq_length = int(rng.integers(1, 64))
        args = (sizes, document_index, seq_length, num_epochs, tokens_per_epoch, drop_last, extra)
        expected = helpers.build_sample_idx_reference(*args)
        for build in (helpers.extension().build_sample_idx_int32, helpers.extension().build_sample_idx_int64):
            result = build(*args)
            assert result.dtype == (np.int32 if build.__name__.endswith("int32") else np.int64)
            np.testing.assert_array_equal(result, expected, err_msg=f"trial {trial}: {args}")


def test_sample_idx_by_hand():
    # documents of 3, 5 and 4 tokens; seq_length 4 with one extra token: samples of 5 overlapping by one
    result = helpers.build_sample_idx(np.array([3, 5, 4]), np.array([0, 1, 2]), 4, 1, 12)
    # stream positions 0, 4, 8: (doc 0, 0), (doc 1, 1), (doc 2, 0)
    assert result.tolist() == [[0, 0], [1, 1], [2, 0]]


def test_sample_idx_many_epochs_large():
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 3000, 2000).astype(np.int32)
    document_index = np.concatenate([rng.permutation(2000) for _ in range(50)]).astype(np.int32)
    args = (sizes, document_index, 1024, 50, int(sizes.sum()))
    np.testing.assert_array_equal(helpers.build_sample_idx(*args), helpers.build_sample_idx_reference(*args))


def test_blending_matches_reference_and_weights():
    rng = np.random.default_rng(3)
    for num_datasets in (1, 2, 5, 17):
        weights = rng.random(num_datasets)
        weights /= weights.sum()
        size = 4000
        result = helpers.build_blending_indices(weights, size)
        expected = helpers.build_blending_indices_reference(weights, size)
        for got, want in zip(result, expected):
            np.testing.assert_array_equal(got, want)
        counts = np.bincount(result[0], minlength=num_datasets)
        assert np.all(np.abs(counts - weights * size) <= 1.0 + 1e-9)  # greedy never lags by a full sample
        for d in range(num_datasets):  # each dataset's samples are taken in order 0, 1, 2, ...
            assert result[1][result[0] == d].tolist() == list(range(counts[d]))


def test_exhaustive_blending_matches_reference():
    rng = np.random.default_rng(4)
    for num_datasets in (1, 3, 8):
        sizes = rng.integers(0, 400, num_datasets)
        sizes[0] += 1
        result = helpers.build_exhaustive_blending_indices(sizes)
        expected = helpers.build_exhaustive_blending_indices_reference(sizes)
        for got, want in zip(result, expected):
            np.testing.assert_array_equal(got, want)
        assert np.bincount(result[0], minlength=num_datasets).tolist() == sizes.tolist()


def test_blending_rejects_wrong_output_dtype():
    with pytest.raises(TypeError):
        helpers.extension().build_blending_indices(np.zeros(4, np.int8), np.zeros(4, np.int64),
                                                   np.array([0.5, 0.5]), 2, 4, False)
    dataset_index = np.zeros(4, np.uint8)  # Megatron's older uint8 layout is accepted and filled in place
    helpers.extension().build_blending_indices(dataset_index, np.zeros(4, np.int64), np.array([0.5, 0.5]), 2, 4)
    assert dataset_index.tolist() == [0, 1, 0, 1]


def test_missing_extension_says_how_to_build(monkeypatch):
    monkeypatch.setattr(helpers, "_extension", None)
    monkeypatch.setitem(sys.modules, "core.datasets.helpers_cpp", None)  # makes the import fail
    with pytest.raises(ImportError, match=r"pip install -e \..*build_ext --inplace"):
        helpers.build_sample_idx(np.array([4]), np.array([0]), 2, 1, 4)
