"""Bad data, split, tokenizer, batch and device inputs stop the entry points before any process group.

Each case used to surface after the model was built, as a traceback. Now ``pretrain`` (and
``posttrain`` for its stages) prints exactly one line, ``error: ...``, naming the flag or file and the fix,
and exits 2, while ``init_distributed``, ``initialize`` and ``Trainer`` (the process groups and the model) are
tripwires that fail the test if reached. A control case shows that the same flags with sound inputs do reach
them (the checks are not over-eager), and one case runs ``pretrain_gpt.py`` as a user would.

The data checks open only each ``.idx`` header and compare the ``.bin``'s size with what the index says
(``check_indexed_files``): no token data, no memory map.

    python -m pytest -q tests/unit/test_early_errors.py
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pytest
import torch.distributed as dist

from core.datasets.indexed_dataset import IndexedDatasetBuilder, IndexedDatasetError, check_indexed_files
from core.datasets.sft_dataset import PACKED_FILES, packed_prefix
from core.device import device_problem
from mindspeed_llm import runtime
from mindspeed_llm.training import training
from tests.unit.test_posttrain_sft import ARGV as SFT_ARGV
from tests.unit.test_posttrain_sft import instruction_dataset

REPO = Path(__file__).resolve().parents[2]
ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "2", "--lr", "1e-3",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "100", "--seed", "1", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1", "--num-workers", "0",
]


# ---------------------------------------------------------------------------- inputs on disk

def _write_corpus(prefix: Path, documents: int, dtype=np.uint16, seed: int = 0) -> None:
    rng = np.random.RandomState(seed)
    with IndexedDatasetBuilder(f"{prefix}.bin", dtype) as builder:
        for _ in range(documents):
            builder.add_item(rng.randint(0, 99, size=rng.randint(20, 80)))
            builder.end_document()
        builder.finalize(f"{prefix}.idx")


def _pair(folder: Path, name: str, bin_from: str, idx_from: str) -> None:
    """``name.bin`` copied from ``bin_from``, ``name.idx`` from ``idx_from`` (a mismatched pair)."""
    shutil.copy(folder / f"{bin_from}.bin", folder / f"{name}.bin")
    shutil.copy(folder / f"{idx_from}.idx", folder / f"{name}.idx")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Sound corpora and damaged copies of them, tokenizers that cannot load, a packed instruction dataset."""
    folder = tmp_path_factory.mktemp("inputs")
    _write_corpus(folder / "good", 200)
    _write_corpus(folder / "other", 150, seed=1)
    _write_corpus(folder / "wide", 200, dtype=np.int32)  # same documents, int32 tokens
    _write_corpus(folder / "empty", 0)
    (folder / "prep").mkdir()
    _write_corpus(folder / "prep" / "corpus_text_document", 30)  # what preprocess_data.py --output-prefix writes
    _pair(folder, "truncated", "good", "good")
    os.truncate(folder / "truncated.bin", os.path.getsize(folder / "good.bin") - 10)
    _pair(folder, "other_corpus", "good", "other")  # the .idx of another corpus
    _pair(folder, "wrong_dtype", "good", "wide")  # an int32 index over uint16 tokens
    _pair(folder, "version2", "good", "good")
    raw = bytearray((folder / "version2.idx").read_bytes())
    raw[9] = 2  # the little-endian version field after the 9-byte magic
    (folder / "version2.idx").write_bytes(bytes(raw))
    (folder / "garbage.model").write_bytes(np.random.RandomState(0).bytes(300))
    (folder / "no_tokenizer").mkdir()
    (folder / "bad_tokenizer").mkdir()
    (folder / "bad_tokenizer" / "tokenizer.json").write_text("{not json")
    (folder / "sft").mkdir()
    instruction, _ = instruction_dataset(folder / "sft")  # sft/alpaca_packed_*
    for name in PACKED_FILES:  # sft/cut_packed_*: the labels' .bin lost its last token
        for ext in (".bin", ".idx"):
            shutil.copy(packed_prefix(instruction, name) + ext, packed_prefix(str(folder / "sft" / "cut"), name) + ext)
    os.truncate(packed_prefix(str(folder / "sft" / "cut"), "labels") + ".bin",
                os.path.getsize(packed_prefix(instruction, "labels") + ".bin") - 4)
    return folder


# ---------------------------------------------------------------------------- the cases

Argv = Callable[[Path], List[str]]


def _with(argv: List[str], **flags: Optional[str]) -> List[str]:
    """``argv`` with ``--flag value`` replaced, added, or removed (value None)."""
    out = list(argv)
    for name, value in flags.items():
        flag = "--" + name.replace("_", "-")
        if flag in out:
            at = out.index(flag)
            out[at:at + 2] = [] if value is None else [flag, value]
        elif value is not None:
            out += [flag, value]
    return out


def _data(*words: str) -> Argv:
    """ARGV with ``--data-path`` of ``words`` (``{d}`` is the data folder)."""
    return lambda d: ARGV + ["--data-path", *[word.format(d=d) for word in words]]


def _good(**flags: Optional[str]) -> Argv:
    return lambda d: _with(ARGV + ["--data-path", f"{d}/good"], **flags)


def _tokenizer(kind: str, flag: str, path: str) -> Argv:
    return lambda d: _with(ARGV, tokenizer_type=kind, vocab_size=None) + ["--data-path", f"{d}/good", flag,
                                                                          path.format(d=d)]


def _split(split: str) -> Argv:
    return lambda d: ARGV + ["--data-path", f"{d}/good", "--split", split]


def _per_split(**paths: str) -> Argv:
    return lambda d: ARGV + [word for flag, path in paths.items()
                             for word in ("--" + flag.replace("_", "-"), path.format(d=d))] + [
        "--eval-iters", "1", "--eval-interval", "1"]


# name: (argv, substrings of the one error line); the list first, then further inputs a new user tries
CASES: Dict[str, Tuple[Argv, List[str]]] = {
    "missing_prefix": (_data("{d}/nope"), ["--data-path", "nope.idx: no such file", "preprocess_data.py"]),
    "truncated_bin": (_data("{d}/truncated"), ["--data-path", "truncated.bin", "is truncated",
                                              "run preprocess_data.py again"]),
    "idx_of_another_corpus": (_data("{d}/other_corpus"), ["other_corpus.bin", "another corpus"]),
    "idx_of_another_dtype": (_data("{d}/wrong_dtype"), ["wrong_dtype.bin", "tokens of int32", "(or dtype)"]),
    "idx_version": (_data("{d}/version2"), ["version2.idx", "index version 2", "preprocess_data.py"]),
    "split_not_a_number": (_split("90,x"), ["--split '90,x'", "e.g. --split 969,30,1"]),
    "split_all_zero": (_split("0,0,0"), ["--split '0,0,0'", "positive sum"]),
    "split_negative": (_split("90,-5,5"), ["--split '90,-5,5'", "non-negative"]),
    "tokenizer_model_missing": (_tokenizer("SentencePieceTokenizer", "--tokenizer-model", "{d}/none.model"),
                                ["--tokenizer-model", "none.model: no such file"]),
    "tokenizer_model_garbage": (_tokenizer("SentencePieceTokenizer", "--tokenizer-model", "{d}/garbage.model"),
                                ["--tokenizer-model", "garbage.model: not a SentencePiece model"]),
    "tokenizer_dir_missing": (_tokenizer("PretrainedFromHF", "--tokenizer-name-or-path", "{d}/no_such_dir"),
                              ["--tokenizer-name-or-path", "no_such_dir: no such directory"]),
    "tokenizer_dir_without_files": (_tokenizer("PretrainedFromHF", "--tokenizer-name-or-path", "{d}/no_tokenizer"),
                                    ["--tokenizer-name-or-path", "holds none of tokenizer.json"]),
    "micro_batch_zero": (_good(micro_batch_size="0"), ["--micro-batch-size must be at least 1, got 0"]),
    "global_batch_not_a_multiple": (_good(global_batch_size="5"), ["--global-batch-size (5)", "multiple of 2"]),
    "vocab_negative": (_good(vocab_size="-5"), ["--vocab-size must be at least 1, got -5"]),
    "vocab_zero": (_good(vocab_size="0"), ["--vocab-size must be at least 1, got 0"]),
    "weights_odd": (_data("0.5", "a", "0.5"), ["--data-path '0.5 a 0.5'", "odd number", "WEIGHT PREFIX"]),
    "seq_length_zero": (_good(seq_length="0"), ["--seq-length must be at least 1, got 0"]),
    "train_data_path_missing": (_per_split(train_data_path="{d}/nope"), ["--train-data-path", "nope.idx"]),
    "valid_data_path_truncated": (_per_split(train_data_path="{d}/good", valid_data_path="{d}/truncated"),
                                  ["--valid-data-path", "truncated.bin", "is truncated"]),
    "blend_missing_prefix": (_data("0.3", "{d}/good", "0.7", "{d}/nope"), ["--data-path", "nope.idx: no such file"]),
    "blend_truncated": (_data("0.3", "{d}/good", "0.7", "{d}/truncated"), ["--data-path", "truncated.bin"]),
    # further inputs
    "prefix_with_bin_extension": (_data("{d}/good.bin"), ["give the prefix without .bin: --data-path"]),
    "output_prefix_of_preprocess": (_data("{d}/prep/corpus"), ["found", "prep/corpus_text_document"]),
    "data_folder": (_data("{d}/prep"), ["found", "prep/corpus_text_document"]),
    "weight_after_prefix": (_data("{d}/good", "0.5", "{d}/other", "0.5"), ["a weight goes before its prefix"]),
    "split_nan": (_split("nan,1,1"), ["--split 'nan,1,1'"]),
    "weight_infinite": (_data("inf", "{d}/good", "1", "{d}/other"), ["--data-path", "finite"]),
    "empty_corpus": (_data("{d}/empty"), ["--data-path", "empty: the dataset holds no sequences"]),
    "tokenizer_json_corrupt": (_tokenizer("PretrainedFromHF", "--tokenizer-name-or-path", "{d}/bad_tokenizer"),
                               ["--tokenizer-name-or-path", "bad_tokenizer: transformers cannot load"]),
    "train_iters_zero": (_good(train_iters="0"), ["--train-iters must be at least 1, got 0"]),
    "lr_negative": (_good(lr="-1"), ["--lr must be 0 or more"]),
    "seed_negative": (_good(seed="-1"), ["--seed must be in 0..4294967295, got -1"]),
    "global_batch_zero": (_good(global_batch_size="0"), ["--global-batch-size must be at least 1, got 0"]),
    "data_cache_path_a_file": (lambda d: _good()(d) + ["--data-cache-path", f"{d}/good.bin"],
                               ["--data-cache-path", "is a file, not a directory"]),
}
for _device in ("cuda", "npu"):  # only where this machine lacks the device
    if device_problem(_device) is not None:
        CASES[f"device_{_device}"] = (_good(device=_device), [f"--device {_device}", "--device cpu"])

POSTTRAIN_CASES: Dict[str, Tuple[Argv, List[str]]] = {
    "sft_packed_labels_truncated": (lambda d: SFT_ARGV + ["--data-path", f"{d}/sft/cut"],
                                    ["cut_packed_labels_document.bin", "is truncated"]),
    "sft_tokenizer_garbage": (lambda d: _with(SFT_ARGV, tokenizer_type="SentencePieceTokenizer", vocab_size=None)
                              + ["--tokenizer-model", f"{d}/garbage.model", "--data-path", f"{d}/sft/alpaca"],
                              ["--tokenizer-model", "not a SentencePiece model"]),
    "sft_split_not_a_number": (lambda d: SFT_ARGV + ["--data-path", f"{d}/sft/alpaca", "--split", "a,b"],
                               ["--split 'a,b'"]),
}


# ---------------------------------------------------------------------------- tripwires

class ProcessGroupReached(AssertionError):
    """Raised by the tripwires: the run got past the checks."""


@pytest.fixture
def tripwires(monkeypatch):
    """init_distributed, initialize and Trainer (process groups, the model) fail the test if reached."""
    def reached(*_args, **_kwargs):
        raise ProcessGroupReached("the run reached the process groups / the model")

    for module, name in ((runtime, "init_distributed"), (runtime, "initialize"), (training, "Trainer")):
        monkeypatch.setattr(module, name, reached)


def _entry(kind: str) -> Callable[[List[str]], object]:
    from mindspeed_llm.posttrain import posttrain

    return {"pretrain": training.pretrain, "posttrain": posttrain}[kind]


def _fails_early(kind: str, argv: List[str], capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        _entry(kind)(argv)
    assert info.value.code == 2
    assert not dist.is_initialized()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("kind,case", [("pretrain", name) for name in CASES]
                         + [("posttrain", name) for name in POSTTRAIN_CASES])
def test_bad_input_is_one_line_before_any_process_group(kind, case, data, capsys, tripwires):
    argv, expected = (CASES if kind == "pretrain" else POSTTRAIN_CASES)[case]
    line = _fails_early(kind, argv(data), capsys)
    for text in expected:
        assert text in line, f"{text!r} not in {line!r}"


@pytest.mark.parametrize("kind,argv", [
    ("pretrain", _data("{d}/good")),
    ("pretrain", _data("0.3", "{d}/good", "0.7", "{d}/other")),
    ("pretrain", _per_split(train_data_path="{d}/good", valid_data_path="{d}/other")),
    ("posttrain", lambda d: SFT_ARGV + ["--data-path", f"{d}/sft/alpaca", "--split", "80,20,0"]),
])
def test_sound_inputs_reach_the_process_groups(kind, argv, data, tripwires):
    """Control: the checks pass sound inputs through to the (tripwired) process-group setup."""
    with pytest.raises(ProcessGroupReached):
        _entry(kind)(argv(data))


def test_data_check_reads_headers_only(data, monkeypatch):
    """check_indexed_files maps and reads no arrays (a terabyte corpus is checked as fast as this one)."""
    def no_arrays(*_args, **_kwargs):
        raise AssertionError("the check read an array")

    monkeypatch.setattr(np, "memmap", no_arrays)
    monkeypatch.setattr(np, "fromfile", no_arrays)
    monkeypatch.setattr(np, "frombuffer", no_arrays)
    header = check_indexed_files(str(data / "good"))
    assert (header.sequence_count, header.document_count) == (200, 201)
    with pytest.raises(IndexedDatasetError, match="truncated"):
        check_indexed_files(str(data / "truncated"))


def test_pretrain_script_prints_one_line_and_exits_2(data):
    """As a user runs it: ``python pretrain_gpt.py ...`` with a truncated .bin."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["WORLD_SIZE"] = "1"
    result = subprocess.run([sys.executable, "pretrain_gpt.py", *_data("{d}/truncated")(data)], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --data-path "), result.stderr
    assert f"{data}/truncated.bin" in lines[0] and "is truncated" in lines[0]
    assert result.stdout == ""  # nothing was built or trained
