"""Token ids beyond the vocabulary are found when the datasets open, not at the batch that holds them.

Each corpus's ``.bin`` is scanned once for its largest id (in chunks), the result cached beside the index cache;
pretraining compares it with ``--vocab-size`` before the first step and names the prefix. Corpora here are tiny
(a few hundred int32 tokens); the bad id sits in the LAST document, which a per-batch check would meet last.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
from typing import List, Sequence

import numpy as np
import pytest

from core.datasets import gpt_dataset
from core.datasets.gpt_dataset import DatasetCacheError, build_pretraining_datasets, corpus_max_token_ids
from core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder, scan_max_token_id
from mindspeed_llm.training.pretrain_task import TrainingDataError, check_corpus_token_ids
from mindspeed_llm.training.training import Trainer, pretrain, setup, train

VOCAB = 64
BAD_ID = 77
ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2", "--lr", "1e-3",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", str(VOCAB), "--seed", "1", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1", "--split", "100,0,0",
]


def _corpus(prefix: str, bad_id: int = -1, dtype=np.int32, documents: int = 12) -> str:
    """``documents`` documents of 40 ids below VOCAB; with ``bad_id`` >= 0 the last document ends with it."""
    builder = IndexedDatasetBuilder(prefix + ".bin", dtype)
    rng = np.random.RandomState(len(prefix))
    for index in range(documents):
        tokens = rng.randint(0, VOCAB, size=40)
        if bad_id >= 0 and index == documents - 1:
            tokens[-1] = bad_id
        builder.add_item(tokens)
        builder.end_document()
    builder.finalize(prefix + ".idx")
    return prefix


def _argv(tmp_path, data_path: Sequence[str]) -> List[str]:
    return ARGV + ["--data-path", *data_path, "--data-cache-path", str(tmp_path / "cache")]


@pytest.fixture
def scans(monkeypatch) -> List[str]:
    """The prefixes scanned in this test (the real scan runs)."""
    seen: List[str] = []

    def counted(dataset, *args, **kwargs):
        seen.append(dataset.path_prefix)
        return scan_max_token_id(dataset, *args, **kwargs)

    monkeypatch.setattr(gpt_dataset, "scan_max_token_id", counted)
    return seen


def _no_scan(dataset, *args, **kwargs):
    raise AssertionError(f"{dataset.path_prefix} scanned again; its cached largest id should have been read")


def test_scan_reads_every_chunk(tmp_path) -> None:
    """The chunked scan equals numpy's max wherever the largest id lies (first, middle, last chunk, unsigned)."""
    for dtype, where in ((np.int32, 0), (np.int32, 150), (np.uint16, 399)):
        prefix = str(tmp_path / f"c_{np.dtype(dtype)}_{where}")
        builder = IndexedDatasetBuilder(prefix + ".bin", dtype)
        tokens = np.arange(400) % 50
        tokens[where] = 60000
        builder.add_item(tokens)
        builder.finalize(prefix + ".idx")
        dataset = IndexedDataset(prefix)
        assert scan_max_token_id(dataset, chunk_tokens=7, show_progress=True) == 60000
        assert scan_max_token_id(dataset) == 60000


def test_bad_last_document_stops_before_the_first_step_and_is_scanned_once(tmp_path, scans, monkeypatch, capsys
                                                                           ) -> None:
    prefix = _corpus(str(tmp_path / "bad_text_document"), bad_id=BAD_ID)
    argv = _argv(tmp_path, [prefix])
    steps: List[int] = []
    real_step = Trainer.train_step
    monkeypatch.setattr(Trainer, "train_step", lambda self, it: steps.append(1) or real_step(self, it))
    trainer = setup(argv)
    with pytest.raises(TrainingDataError) as error:
        train(trainer)
    assert str(error.value) == (
        f"the training data holds token id {BAD_ID}, outside the vocabulary of {VOCAB} ids (--data-path {prefix}): "
        "it was tokenized with another tokenizer; preprocess it again with this run's tokenizer, or give the "
        "tokenizer it was made with")
    assert trainer.iteration == 0 and steps == [], "a training step ran before the check"
    assert scans == [prefix]
    cached = glob.glob(str(tmp_path / "cache" / "*-max_token_id.json"))
    assert len(cached) == 1 and json.load(open(cached[0]))["max_token_id"] == BAD_ID
    # the second run reads the cache (a scan would fail) and stops through the entry point: one line, exit 1
    monkeypatch.setattr(gpt_dataset, "scan_max_token_id", _no_scan)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        pretrain(argv)
    assert stopped.value.code == 1 and steps == []
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert err == [f"error: {error.value}"], err


def test_good_corpus_trains_and_a_rewritten_corpus_is_scanned_again(tmp_path, scans) -> None:
    prefix = _corpus(str(tmp_path / "good_text_document"))
    trainer = train(setup(_argv(tmp_path, [prefix])))
    assert trainer.iteration == 2 and scans == [prefix]
    # same lengths, other ids (retokenized): the cached largest id is not reused
    _corpus(prefix, bad_id=BAD_ID)
    with pytest.raises(TrainingDataError, match=f"token id {BAD_ID}, .* \\(--data-path {prefix}\\)"):
        train(setup(_argv(tmp_path, [prefix])))
    assert scans == [prefix, prefix]
    # a damaged cache file is computed again, not trusted
    for path in glob.glob(str(tmp_path / "cache" / "*-max_token_id.json")):
        with open(path, "w") as stream:
            stream.write("{")
    with pytest.raises(TrainingDataError, match=f"token id {BAD_ID}, "):
        train(setup(_argv(tmp_path, [prefix])))
    assert scans == [prefix] * 3


def _args(**paths) -> argparse.Namespace:
    names = ("data_path", "train_data_path", "valid_data_path", "test_data_path")
    return argparse.Namespace(vocab_size=VOCAB, **{name: paths.get(name) for name in names})


def _datasets(tmp_path, rank: int = 0, **paths):
    return build_pretraining_datasets(paths.get("data_path"), "100,0,0" if "data_path" in paths else None,
                                      paths.get("train_data_path"), paths.get("valid_data_path"),
                                      paths.get("test_data_path"), seq_length=16, seed=1, num_samples=(40, 8, 0),
                                      cache_path=str(tmp_path / "cache"), rank=rank, scan_max_token_id=True)


def test_blend_names_the_bad_corpus(tmp_path, scans) -> None:
    good = _corpus(str(tmp_path / "good_text_document"))
    bad = _corpus(str(tmp_path / "bad_text_document"), bad_id=BAD_ID)
    data_path = ["0.5", good, "0.5", bad]
    datasets = _datasets(tmp_path, data_path=data_path)
    assert corpus_max_token_ids(datasets)[bad] == BAD_ID and corpus_max_token_ids(datasets)[good] < VOCAB
    with pytest.raises(TrainingDataError, match=f"token id {BAD_ID}, .* \\(--data-path {bad}\\): it was tokenized"):
        check_corpus_token_ids(datasets, _args(data_path=data_path))
    # a per-split blend: the flag that names the corpus
    datasets = _datasets(tmp_path, train_data_path=[good], valid_data_path=[bad])
    with pytest.raises(TrainingDataError, match=f"\\(--valid-data-path {bad}\\)"):
        check_corpus_token_ids(datasets, _args(train_data_path=[good], valid_data_path=[bad]))
    assert sorted(scans) == sorted([good, bad])  # each corpus once, whatever the blend


def test_other_ranks_read_rank0s_result(tmp_path, monkeypatch) -> None:
    prefix = _corpus(str(tmp_path / "bad_text_document"), bad_id=BAD_ID)
    monkeypatch.setattr(gpt_dataset, "scan_max_token_id", _no_scan)
    with pytest.raises(DatasetCacheError, match="max_token_id.json: missing; rank 0 scans"):
        _datasets(tmp_path, rank=1, data_path=[prefix])
    monkeypatch.setattr(gpt_dataset, "scan_max_token_id", scan_max_token_id)
    _datasets(tmp_path, rank=0, data_path=[prefix])
    monkeypatch.setattr(gpt_dataset, "scan_max_token_id", _no_scan)
    assert corpus_max_token_ids(_datasets(tmp_path, rank=1, data_path=[prefix])) == {prefix: BAD_ID}


def test_the_per_batch_check_stays(tmp_path, monkeypatch, capsys) -> None:
    """Data the scan does not see (here: the scan's check switched off) still stops at its first batch, in a
    DataLoader worker: one line, exit 1."""
    import mindspeed_llm.training.pretrain_task as pretrain_task

    monkeypatch.setattr(pretrain_task, "check_corpus_token_ids", lambda datasets, args: None)
    prefix = str(tmp_path / "bad_text_document")
    builder = IndexedDatasetBuilder(prefix + ".bin", np.int32)  # every document holds the bad id
    for _ in range(12):
        builder.add_item(np.full(40, BAD_ID))
        builder.end_document()
    builder.finalize(prefix + ".idx")
    with pytest.raises(SystemExit) as stopped:
        pretrain(_argv(tmp_path, [prefix]) + ["--num-workers", "1"])
    assert stopped.value.code == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"error: the training data holds token id {BAD_ID}, outside"), err
