"""``posttrain.py --stage sft`` on packed instruction data.

* The loss is the mean cross-entropy over the assistant tokens only, computed here from the raw files
  (labels -100 elsewhere, no prediction across a packed sample's end).
* posttrain.py trains from the command line (one process); packed SFT under context parallelism and TP
  equals one process in tests/distributed/test_context_parallel.py.
* Bad input: a pairwise dataset given to SFT, no --is-instruction-dataset, a missing --stage, an
  instruction dataset given to DPO, and posttrain flags given to pretraining, each one line.

    python -m pytest -q tests/unit/test_posttrain_sft.py
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from core.datasets.indexed_dataset import IndexedDatasetBuilder
from core.datasets.sft_dataset import PACKED_FILES, packed_prefix
from mindspeed_llm.data.handlers import PAIRWISE_FILES

ROOT = Path(__file__).resolve().parents[2]
SEQ = 16
ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
        "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ), "--vocab-size", "32", "--normalization",
        "RMSNorm", "--swiglu", "--disable-bias-linear", "--micro-batch-size", "2", "--global-batch-size", "4",
        "--train-iters", "2", "--optimizer", "sgd", "--lr", "0.5", "--tokenizer-type", "NullTokenizer", "--seed",
        "3", "--device", "cpu", "--eval-iters", "0", "--log-interval", "1", "--hidden-dropout", "0",
        "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3",
        "--position-embedding-type", "rope", "--stage", "sft", "--is-instruction-dataset"]

Packed = Tuple[List[int], List[int], List[int]]  # input ids, labels (-100: not trained), document ids


def packed_instruction_sequences(count: int, seed: int = 0) -> List[Packed]:
    """Sequences of 1-3 samples (prompt then reply), packed as preprocess_data.py --pack writes them."""
    rng = np.random.RandomState(seed)
    sequences = []
    for _ in range(count):
        ids, labels, docs = [], [], []
        for document in range(1, rng.randint(2, 5)):
            prompt, reply = rng.randint(0, 31, rng.randint(1, 4)).tolist(), rng.randint(0, 31, rng.randint(1, 4)).tolist()
            ids += prompt + reply
            labels += [-100] * len(prompt) + reply
            docs += [document] * (len(prompt) + len(reply))
        sequences.append((ids[:SEQ + 1], labels[:SEQ + 1], docs[:SEQ + 1]))
    return sequences


def write_indexed(prefix: str, names: Sequence[str], rows: Sequence[Sequence[List[int]]]) -> None:
    for column, name in enumerate(names):
        path = packed_prefix(prefix, name)
        builder = IndexedDatasetBuilder(path + ".bin", np.int32)
        for row in rows:
            builder.add_item(np.array(row[column]))
            builder.end_document()
        builder.finalize(path + ".idx")


def instruction_dataset(directory: Path, count: int = 24) -> Tuple[str, List[Packed]]:
    prefix = str(directory / "alpaca")
    sequences = packed_instruction_sequences(count)
    write_indexed(prefix, PACKED_FILES, [(ids, docs, labels) for ids, labels, docs in sequences])
    return prefix, sequences


def test_the_loss_counts_only_the_assistant_tokens(tmp_path: Path) -> None:
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.training import setup

    prefix, sequences = instruction_dataset(tmp_path)
    trainer = setup(ARGV + ["--data-path", prefix], SFTTask)
    dataset = trainer.datasets()[0]
    batch = trainer.task.collate([dataset[0], dataset[1]])
    loss, stats = trainer.task.forward_step(batch, trainer.model)
    logits = trainer.model(batch["tokens"], document_ids=batch["document_ids"],
                           position_ids=batch["position_ids"])  # [b, s, v]
    terms = []
    for row, sample in enumerate(int(i) for i in dataset.order[:2]):
        ids, labels, docs = sequences[sample]
        for i in range(len(ids) - 1):
            if labels[i + 1] != -100 and docs[i + 1] == docs[i]:  # an assistant token of the same sample
                terms.append(F.cross_entropy(logits[row, i], torch.tensor(ids[i + 1])))
    assert terms and torch.allclose(loss, torch.stack(terms).mean(), atol=1e-6)
    assert stats["lm loss"] == loss.detach()


def test_posttrain_trains_from_the_command_line(tmp_path: Path) -> None:
    prefix, _ = instruction_dataset(tmp_path)
    done = subprocess.run([sys.executable, str(ROOT / "posttrain.py"), *ARGV, "--data-path", prefix,
                           "--train-iters", "3"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if "lm loss:" in line]
    assert len(lines) == 3 and "task sft" in done.stdout


def _error(argv: List[str], capsys: pytest.CaptureFixture, entry: str = "posttrain") -> str:
    from mindspeed_llm.posttrain import posttrain
    from mindspeed_llm.training.training import pretrain

    with pytest.raises(SystemExit) as info:
        {"posttrain": posttrain, "pretrain": pretrain}[entry](argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_bad_posttrain_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    instruction, _ = instruction_dataset(tmp_path)
    pairwise = str(tmp_path / "pairs")
    write_indexed(pairwise, PAIRWISE_FILES, [([1, 2], [-100, 2], [1, 3], [-100, 3])])
    assert "is a pairwise dataset" in _error(ARGV + ["--data-path", pairwise], capsys)
    without = [arg for arg in ARGV if arg != "--is-instruction-dataset"]
    assert "add --is-instruction-dataset" in _error(without + ["--data-path", instruction], capsys)
    no_stage = [arg for arg in ARGV if arg not in ("--stage", "sft")]
    assert "posttrain.py needs --stage" in _error(no_stage + ["--data-path", instruction], capsys)
    dpo = [arg for arg in ARGV if arg != "--is-instruction-dataset"] + ["--is-pairwise-dataset"]
    assert "is an instruction dataset" in _error(dpo + ["--stage", "dpo", "--data-path", instruction], capsys)
    assert ("unrecognized arguments: --is-instruction-dataset --stage sft (--is-instruction-dataset, --stage are "
            "flags of posttrain.py)") in _error(no_stage + ["--stage", "sft", "--mock-data"], capsys, "pretrain")
    assert "--stage" in _error(ARGV + ["--stage", "stf", "--data-path", instruction], capsys)  # misspelt
