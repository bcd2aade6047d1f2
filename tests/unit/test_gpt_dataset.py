"""GPTDataset / BlendedDataset: token stream, determinism, cache reuse, splits, blends, sampler resume."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from core.datasets.gpt_dataset import (
    BlendedDataset,
    DatasetCacheError,
    GPTDataset,
    blended_sample_counts,
    build_pretraining_datasets,
    parse_blend,
    parse_split,
    split_ranges,
)
from core.datasets.indexed_dataset import IndexedDatasetBuilder
from core.datasets.samplers import PretrainingSampler

SEQ = 16


def _corpus(path: str, num_docs: int, token_base: int, seed: int) -> list:
    """Document ``d`` holds tokens ``token_base + d`` only, so a token tells which document it came from."""
    rng = np.random.default_rng(seed)
    builder = IndexedDatasetBuilder(path + ".bin", np.int32)
    docs = []
    for d in range(num_docs):
        tokens = np.full(int(rng.integers(1, 50)), token_base + d)
        docs.append(tokens)
        builder.add_item(tokens)
        builder.end_document()
    builder.finalize(path + ".idx")
    return docs


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    a, b = str(root / "a"), str(root / "b")
    return {"a": a, "b": b, "docs_a": _corpus(a, 300, 0, 1), "docs_b": _corpus(b, 200, 10_000, 2)}


def _build(prefix, num_samples=(600, 40, 10), split="90,8,2", cache=None, **kwargs):
    return build_pretraining_datasets(prefix, split, None, None, None, SEQ, 1234, num_samples, cache, **kwargs)


def _texts(dataset, count=None) -> torch.Tensor:
    return torch.stack([dataset[i]["text"] for i in range(count or len(dataset))])  # [n, s + 1]


def test_parsers():
    assert parse_blend("corpus") == (["corpus"], None)
    assert parse_blend(["0.3", "a", "0.7", "b"]) == (["a", "b"], [0.3, 0.7])
    assert parse_blend(["0.3 a 0.7 b"]) == (["a", "b"], [0.3, 0.7])
    with pytest.raises(ValueError, match="pairs"):
        parse_blend("0.3 a 0.7")
    assert parse_split("969, 30, 1") == pytest.approx([0.969, 0.03, 0.001])
    assert split_ranges(parse_split("969,30,1"), 1000) == [(0, 969), (969, 999), (999, 1000)]
    assert split_ranges(parse_split("98,2"), 10) == [(0, 10), (10, 10), (10, 10)]
    assert blended_sample_counts([0.25, 0.75], 1000) == [252, 754]  # ceil(ceil(n w) * 1.005)


def test_samples_follow_the_token_stream(corpora, tmp_path):
    train, _, _ = _build(corpora["a"], cache=str(tmp_path))
    docs = corpora["docs_a"]
    stream = np.concatenate([docs[d] for d in train.document_index])
    for sample in range(len(train)):  # unshuffled sample i is stream[i * SEQ : i * SEQ + SEQ + 1]
        np.testing.assert_array_equal(train._tokens(sample), stream[sample * SEQ:sample * SEQ + SEQ + 1])
    begin, end = train.split_range
    epochs = train.document_index.reshape(-1, end - begin)  # each epoch is a permutation of the split
    assert all(sorted(epoch.tolist()) == list(range(begin, end)) for epoch in epochs) and len(epochs) > 1
    assert len(train) >= 600 and sorted(np.asarray(train.shuffle_index).tolist()) == list(range(len(train)))
    assert train[0]["text"].dtype == torch.int64 and train[0]["text"].shape == (SEQ + 1,)


def test_deterministic_and_cache_reused(corpora, tmp_path):
    first_dir, second_dir = str(tmp_path / "one"), str(tmp_path / "two")
    builds = GPTDataset.builds
    first = _build(corpora["a"], cache=first_dir)
    assert GPTDataset.builds == builds + 3
    mtimes = {name: os.path.getmtime(os.path.join(first_dir, name)) for name in os.listdir(first_dir)}
    assert len(mtimes) == 12  # 3 splits x (3 arrays + description)
    again = _build(corpora["a"], cache=first_dir)
    assert GPTDataset.builds == builds + 3 and all(d.cache_hit for d in again)
    assert mtimes == {name: os.path.getmtime(os.path.join(first_dir, name)) for name in os.listdir(first_dir)}
    rebuilt = _build(corpora["a"], cache=second_dir)  # an independent build gives the same samples
    for x, y, z in zip(first, again, rebuilt):
        assert torch.equal(_texts(x), _texts(y)) and torch.equal(_texts(x), _texts(z))
    other_seed = build_pretraining_datasets(corpora["a"], "90,8,2", None, None, None, SEQ, 99, (600, 40, 10),
                                            str(tmp_path / "three"))[0]
    assert not torch.equal(_texts(first[0], 50), _texts(other_seed, 50))


def test_new_data_under_the_same_prefix_gets_new_indices(tmp_path):
    """A stale cache is never reused: the cache key includes the sequence lengths' fingerprint."""
    prefix, cache = str(tmp_path / "corpus"), str(tmp_path / "cache")
    _corpus(prefix, 120, 0, 1)
    old = _build(prefix, num_samples=(100, 10, 5), cache=cache)[0]
    docs = _corpus(prefix, 120, 50_000, 7)  # rewritten in place: as many documents, other lengths and tokens
    new = _build(prefix, num_samples=(100, 10, 5), cache=cache)[0]
    assert not new.cache_hit and old.hash != new.hash
    stream = np.concatenate([docs[d] for d in new.document_index])
    for sample in range(5):
        np.testing.assert_array_equal(new._tokens(sample), stream[sample * SEQ:sample * SEQ + SEQ + 1])


def test_rank0_builds_others_load(corpora, tmp_path):
    cache = str(tmp_path)
    with pytest.raises(DatasetCacheError, match="rank 0 builds"):
        _build(corpora["a"], cache=cache, rank=1)
    calls = []
    built = _build(corpora["a"], cache=cache, rank=0, is_rank0_first_barrier=lambda: calls.append(0))
    builds = GPTDataset.builds
    loaded = _build(corpora["a"], cache=cache, rank=3, is_rank0_first_barrier=lambda: calls.append(3))
    assert calls == [0, 3] and GPTDataset.builds == builds
    assert torch.equal(_texts(built[0]), _texts(loaded[0]))


def test_samples_independent_of_world_size(corpora, tmp_path):
    train = _build(corpora["a"], cache=str(tmp_path))[0]
    total, micro = 96, 2
    serial = [i for batch in PretrainingSampler(total, 0, micro, 0, 1) for i in batch]
    samplers = [iter(PretrainingSampler(total, 0, micro, rank, 4)) for rank in range(4)]
    parallel = []
    for _ in range(total // (micro * 4)):  # one global step: ranks in order
        for sampler in samplers:
            parallel.extend(next(sampler))
    assert parallel == serial
    assert torch.equal(_texts(train, total), torch.stack([train[i]["text"] for i in parallel]))


def test_sampler_resume_yields_the_next_samples(corpora, tmp_path):
    train = _build(corpora["a"], cache=str(tmp_path))[0]
    total, micro, dp = 200, 2, 2
    for rank in range(dp):
        full = list(PretrainingSampler(total, 0, micro, rank, dp))
        consumed_steps = 7
        resumed = list(PretrainingSampler(total, consumed_steps * micro * dp, micro, rank, dp))
        assert resumed == full[consumed_steps:]
        assert [train[i]["text"].tolist() for i in resumed[0]] == [train[i]["text"].tolist() for i in full[7]]


def test_split_ranges_hold_their_documents(corpora, tmp_path):
    train, valid, test = _build(corpora["a"], split="90,8,2", cache=str(tmp_path))
    assert train.split_range == (0, 270) and valid.split_range == (270, 294) and test.split_range == (294, 300)
    for dataset in (train, valid, test):
        begin, end = dataset.split_range
        tokens = _texts(dataset)
        assert tokens.min() >= begin and tokens.max() < end  # token value = document id
    _, no_valid, no_test = _build(corpora["a"], split="100,0,0", cache=str(tmp_path))
    assert no_valid is None and no_test is None


def test_blend_follows_weights(corpora, tmp_path):
    blend = f"0.3 {corpora['a']} 0.7 {corpora['b']}"
    train, valid, _ = _build(blend, num_samples=(2000, 100, 10), split="90,8,2", cache=str(tmp_path))
    assert isinstance(train, BlendedDataset) and len(train) == 2000
    assert [len(d) >= n for d, n in zip(train.datasets, blended_sample_counts([0.3, 0.7], 2000))] == [True] * 2
    from_b = (_texts(train)[:, 0] >= 10_000).double().mean().item()
    assert abs(from_b - 0.7) < 0.01
    counts = np.bincount(train.dataset_index, minlength=2) / 2000
    assert np.allclose(counts, [0.3, 0.7], atol=0.01)
    first_half = np.bincount(train.dataset_index[:1000], minlength=2) / 1000  # also true of any prefix
    assert np.allclose(first_half, [0.3, 0.7], atol=0.01)
    assert len(valid) == 100


def test_per_split_paths(corpora, tmp_path):
    train, valid, test = build_pretraining_datasets(
        None, None, corpora["a"], f"0.5 {corpora['a']} 0.5 {corpora['b']}", None, SEQ, 1234, (100, 50, 10),
        str(tmp_path))
    assert train.split_range == (0, 300) and isinstance(valid, BlendedDataset) and test is None
    valid_tokens = _texts(valid)
    assert (valid_tokens[:, 0] >= 10_000).any() and (valid_tokens[:, 0] < 10_000).any()


def test_fields(corpora, tmp_path):
    train = build_pretraining_datasets(corpora["a"], "1,0,0", None, None, None, SEQ, 1, (10, 0, 0), str(tmp_path),
                                       fields=True, eod=5, reset_position_ids=True)[0]
    sample = train[0]
    assert torch.equal(sample["tokens"], sample["text"][:-1]) and torch.equal(sample["labels"], sample["text"][1:])
    assert sample["position_ids"].shape == (SEQ,) and sample["loss_mask"].sum() == SEQ


def test_separate_last_epoch():
    from core.datasets.gpt_dataset import GPTDatasetConfig, build_indices
    sizes = np.full(100, 33, dtype=np.int32)  # 3300 tokens per epoch: 206 samples of 16 (+1)
    config = GPTDatasetConfig(seq_length=SEQ)
    arrays = build_indices(sizes, np.arange(100, dtype=np.int32), 2 * 206 + 10, config)  # 10 from epoch 3
    shuffle = np.asarray(arrays["shuffle_index"])
    before_last = (2 * 3300 - 1) // SEQ
    assert sorted(shuffle[:before_last].tolist()) == list(range(before_last))  # full epochs come first
    arrays = build_indices(sizes, np.arange(100, dtype=np.int32), 2 * 206 + 200, config)  # 97% of epoch 3
    assert sorted(np.asarray(arrays["shuffle_index"])[:before_last].tolist()) != list(range(before_last))


# ---- the packed SFT dataset (core/datasets/sft_dataset.py) ------------------------------------


def _packed(prefix: str, sequences) -> None:
    """sequences: list of (input_ids, labels, document_ids) as the instruction handlers write them."""
    from core.datasets.sft_dataset import PACKED_FILES, packed_prefix
    for name in PACKED_FILES:
        order = {"input_ids": 0, "labels": 1, "attention_mask": 2}[name]
        builder = IndexedDatasetBuilder(packed_prefix(prefix, name) + ".bin", np.int32)
        for sequence in sequences:
            builder.add_item(np.array(sequence[order]))
            builder.end_document()
        builder.finalize(packed_prefix(prefix, name) + ".idx")


def test_sft_packed_dataset(tmp_path):
    from core.datasets.indexed_dataset import IndexedDatasetError
    from core.datasets.sft_dataset import SFTPackedDataset
    prefix = str(tmp_path / "sft")
    # two samples packed: [prompt 11 12 | reply 13 14] [prompt 21 | reply 22 23]
    ids = [11, 12, 13, 14, 21, 22, 23]
    labels = [-100, -100, 13, 14, -100, 22, 23]
    docs = [1, 1, 1, 1, 2, 2, 2]
    _packed(prefix, [(ids, labels, docs), ([31, 32, 33], [31, 32, 33], [1, 2, 2])])
    dataset = SFTPackedDataset(prefix, seq_length=8, shuffle=False)
    sample = dataset[0]
    assert sample["tokens"].tolist() == [11, 12, 13, 14, 21, 22, 23, 0]
    assert sample["labels"].tolist() == [0, 13, 14, 0, 22, 23, 0, 0]
    assert sample["loss_mask"].tolist() == [0, 1, 1, 0, 1, 1, 0, 0]
    assert sample["position_ids"].tolist() == [0, 1, 2, 3, 0, 1, 2, 0]
    assert sample["document_ids"].tolist() == [1, 1, 1, 1, 2, 2, 2, 0]
    assert dataset[1]["loss_mask"].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]  # 31 -> 32 crosses documents
    assert dataset[1]["position_ids"].tolist() == [0, 0, 1, 0, 0, 0, 0, 0]
    assert len(SFTPackedDataset(prefix, seq_length=8, num_samples=5)) == 5
    _packed(str(tmp_path / "bad"), [(ids, labels, docs[:-1])])
    with pytest.raises(IndexedDatasetError, match="do not match"):
        SFTPackedDataset(str(tmp_path / "bad"), seq_length=8)
