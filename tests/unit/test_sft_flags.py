"""SFT flags with MindSpeed-LLM's names and meanings.

* ``--no-pad-to-seq-lengths`` (and ``--variable-seq-lengths``, its MindSpeed 2.2 name): a micro-batch is
  its longest sample rounded up to ``--pad-to-multiple-of``, never past ``--seq-length``; the rounding
  also keeps context parallelism's and sequence parallelism's divisors; the losses and gradient norms of
  training steps equal the run padded to ``--seq-length`` (the pipeline and CP/SP layouts of this run equal
  one process in tests/distributed/test_context_parallel.py).
* ``--full-shuffle-instruction-dataset``: the order mixes epochs (each sequence still comes once per epoch
  overall), seeded.
* ``--prompt-type``: preprocess_data.py records the template; posttrain accepts the recorded one and refuses
  another, or one given for a dataset that records none.
* Multi-turn ShareGPT data tokenized by preprocess_data.py trains exactly the assistant replies: every
  system and user turn is masked.
* One-line errors: ``--pad-to-multiple-of`` without variable lengths, a value below 1, a ``--split`` with
  nothing for training (validation splits: tests/unit/test_posttrain_validation.py), and the SFT flags
  given to pretraining.

    python -m pytest -q tests/unit/test_sft_flags.py
"""
from __future__ import annotations

import itertools

import json
from pathlib import Path
from typing import List

import numpy as np
import pytest
import torch

from core.datasets.sft_dataset import PACKED_FILES, SFTPackedDataset
from mindspeed_llm.arguments import parse_args
from mindspeed_llm.data.handlers import settings_path
from mindspeed_llm.posttrain.sft import micro_batch_length_multiple
from tests.unit.test_posttrain_sft import ARGV, SEQ, _error, write_indexed

VARIABLE = ["--no-pad-to-seq-lengths"]


def short_sequences(prefix: str, count: int = 16, seed: int = 1) -> None:
    """Unpacked and packed sequences of 2 to SEQ tokens, so micro-batches need different lengths."""
    rng = np.random.RandomState(seed)
    rows = []
    for _ in range(count):
        lengths = rng.randint(1, 5, rng.randint(1, 3))  # the samples packed in the sequence
        ids, labels, docs = [], [], []
        for document, length in enumerate(lengths, 1):
            prompt = rng.randint(0, 31, length).tolist()
            reply = rng.randint(0, 31, length).tolist()
            ids += prompt + reply
            labels += [-100] * length + reply
            docs += [document] * 2 * length
        rows.append((ids[:SEQ + 1], docs[:SEQ + 1], labels[:SEQ + 1]))
    write_indexed(prefix, PACKED_FILES, rows)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("sft_flags") / "short")
    short_sequences(path)
    return path


def _trainer(prefix: str, *extra: str):
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.training import setup

    return setup(ARGV + ["--data-path", prefix, "--train-iters", "3", *extra], SFTTask)


@pytest.mark.parametrize("flags, multiple", [(VARIABLE, 8), (VARIABLE + ["--pad-to-multiple-of", "3"], 3),
                                             (["--variable-seq-lengths", "--pad-to-multiple-of", "4"], 4)])
def test_a_micro_batch_is_its_longest_sample_rounded_up(prefix: str, flags: List[str], multiple: int) -> None:
    trainer = _trainer(prefix, *flags)
    assert trainer.args.variable_seq_lengths and trainer.pipeline_options().variable_seq_lengths
    dataset, lengths = trainer.datasets()[0], set()
    for start in range(0, len(dataset) - 1, 2):
        samples = [dataset[start], dataset[start + 1]]
        batch = trainer.task.collate(samples)
        longest = max(int((sample["document_ids"] != 0).sum()) for sample in samples)
        expected = min(-(-longest // multiple) * multiple, SEQ)
        assert {tuple(value.shape) for value in batch.values()} == {(2, expected)}
        full = {name: torch.stack([sample[name] for sample in samples]) for name in batch}  # each [2, SEQ]
        assert all(torch.equal(full[name][:, :expected], value) for name, value in batch.items())
        assert not full["document_ids"][:, expected:].any() and not full["loss_mask"][:, expected:].any()  # padding
        lengths.add(expected)
    assert len(lengths) > 1 and min(lengths) < SEQ  # the data makes the lengths vary


def test_the_length_multiple_keeps_context_and_sequence_parallel_divisors() -> None:
    def multiple(*flags: str) -> int:
        return micro_batch_length_multiple(parse_args(list(flags)))

    assert multiple() == 8 and multiple("--pad-to-multiple-of", "3") == 3
    cp2 = ["--context-parallel-size", "2"]
    assert multiple(*cp2) == 8 and multiple(*cp2, "--pad-to-multiple-of", "3") == 12  # 2 x CP ring chunks
    assert multiple(*cp2, "--pad-to-multiple-of", "1", "--attention-mask-type", "general") == 2  # CP parts
    assert multiple(*cp2, "--pad-to-multiple-of", "1", "--context-parallel-algo", "ulysses_cp_algo") == 2
    assert multiple("--pad-to-multiple-of", "3", "--tensor-model-parallel-size", "2", "--sequence-parallel") == 6
    assert multiple(*cp2, "--pad-to-multiple-of", "1", "--tensor-model-parallel-size", "4",
                    "--sequence-parallel") == 8  # TP parts of each CP part
    assert multiple("--pad-to-multiple-of", "3", "--tensor-model-parallel-size", "2") == 3  # no SP: TP keeps s


def test_variable_lengths_train_as_the_padded_run(prefix: str) -> None:
    padded, variable = _trainer(prefix), _trainer(prefix, *VARIABLE, "--pad-to-multiple-of", "2")
    batch = padded.task.collate([padded.datasets()[0][i] for i in range(2)])
    cut = variable.task.collate([variable.datasets()[0][i] for i in range(2)])
    assert cut["tokens"].shape[1] < batch["tokens"].shape[1]
    assert torch.allclose(padded.task.forward_step(batch, padded.model)[0],
                          variable.task.forward_step(cut, variable.model)[0], rtol=1e-6, atol=0)
    steps = []
    for trainer in (padded, variable):
        iterator = trainer.train_iterator()
        steps.append([(r.loss, r.grad_norm) for r in (trainer.train_step(iterator) for _ in range(3))])
    assert np.allclose(steps[0], steps[1], rtol=1e-5, atol=0), steps
    assert steps[0][0] != steps[0][2]  # the steps train


def test_full_shuffle_mixes_epochs(prefix: str) -> None:
    per_epoch = SFTPackedDataset(prefix, SEQ, num_samples=48, seed=5).order
    full = SFTPackedDataset(prefix, SEQ, num_samples=48, seed=5, full_shuffle=True).order
    assert all(sorted(per_epoch[i:i + 16]) == list(range(16)) for i in (0, 16, 32))
    assert sorted(full) == sorted(per_epoch) and any(len(set(full[i:i + 16])) < 16 for i in (0, 16, 32))
    assert np.array_equal(full, SFTPackedDataset(prefix, SEQ, num_samples=48, seed=5, full_shuffle=True).order)
    trainer = _trainer(prefix, "--full-shuffle-instruction-dataset", "--seed", "5")  # the flag reaches the data
    assert np.array_equal(trainer.datasets()[0].order, SFTPackedDataset(prefix, SEQ, num_samples=12, seed=5,
                                                                        full_shuffle=True).order)


# ------------------------------------------------------------------ preprocess_data.py: templates, multi-turn

SYSTEM = "you are the cat bot"
TURNS = [("what is two plus three", "five"), ("hello there how are you", "fine thanks"),
         ("what is the name", "the name is bot")]


@pytest.fixture(scope="module")
def sharegpt(tmp_path_factory: pytest.TempPathFactory):
    """A multi-turn ShareGPT record tokenized by preprocess_data.py (qwen template) and the tokenizer."""
    from mindspeed_llm.tokenizer import PretrainedFromHF
    from tests.unit.test_preprocess_data import sentence
    from tools import train_tokenizer
    from tools.preprocess_data import main

    directory = tmp_path_factory.mktemp("sharegpt")
    texts = [sentence(i) for i in range(300)] + [SYSTEM] + [text for turn in TURNS for text in turn]
    tokenizer = train_tokenizer.train_bpe(iter(texts), vocab_size=300, min_frequency=1)
    train_tokenizer.save_for_transformers(tokenizer, str(directory / "tok"))
    messages = [{"from": "system", "value": SYSTEM}]
    messages += [{"from": role, "value": text} for turn in TURNS for role, text in zip(("human", "gpt"), turn)]
    (directory / "chat.jsonl").write_text(json.dumps({"conversations": messages}) + "\n")
    prefix = str(directory / "chat")
    assert main(["--input", str(directory / "chat.jsonl"), "--handler-name", "SharegptStyleInstructionHandler",
                 "--prompt-type", "qwen", "--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path",
                 str(directory / "tok"), "--output-prefix", prefix]) == 0
    return prefix, PretrainedFromHF(str(directory / "tok"))


def _runs(values: List[int], trained: List[bool]) -> List[List[int]]:
    """The maximal runs of consecutive trained values."""
    runs: List[List[int]] = []
    for index, (value, keep) in enumerate(zip(values, trained)):
        if keep:
            if index == 0 or not trained[index - 1]:
                runs.append([])
            runs[-1].append(value)
    return runs


def test_multi_turn_data_trains_only_the_assistant_turns(sharegpt) -> None:
    prefix, tokenizer = sharegpt
    sample = SFTPackedDataset(prefix, 256, shuffle=False)[0]
    tokens = sample["tokens"][sample["document_ids"] != 0].tolist()
    targets = tokens[1:] + [-1]  # the next token each position predicts
    trained = [bool(m) for m in sample["loss_mask"][:len(tokens)]]
    replies = [tokenizer.detokenize(run) for run in _runs(targets, trained)]
    assert replies == [f"{reply}<|im_end|>\n" for _, reply in TURNS]  # qwen's assistant format, nothing else
    prompts = [tokenizer.detokenize(run) for run in _runs(tokens, [True] + [not m for m in trained[:-1]])]
    assert prompts[0].startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{TURNS[0][0]}")
    assert [f"<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n" in prompt
            for prompt, (query, _) in zip(prompts, TURNS)] == [True] * 3


def test_prompt_type_is_checked_against_the_dataset(sharegpt, prefix: str, capsys: pytest.CaptureFixture) -> None:
    from mindspeed_llm.arguments import validate_args
    from mindspeed_llm.posttrain.sft import SFTTask

    chat, _ = sharegpt
    recorded = json.loads(Path(settings_path(chat)).read_text())
    assert recorded == {"handler_name": "SharegptStyleInstructionHandler", "prompt_type": "qwen",
                        "seq_length": None, "pack": False}
    args = parse_args(ARGV + ["--data-path", chat, "--prompt-type", "qwen"])
    validate_args(args, 1)
    SFTTask(args).validate(args)  # the recorded template is accepted
    assert "differs from qwen, the template" in _error(ARGV + ["--data-path", chat, "--prompt-type", "alpaca"],
                                                       capsys)
    assert "records none" in _error(ARGV + ["--data-path", prefix, "--prompt-type", "qwen"], capsys)


def test_bad_sft_flags_are_one_line(prefix: str, capsys: pytest.CaptureFixture) -> None:
    data = ["--data-path", prefix]
    assert "--pad-to-multiple-of has no effect without --no-pad-to-seq-lengths" in _error(
        ARGV + data + ["--pad-to-multiple-of", "4"], capsys)
    assert "--pad-to-multiple-of must be at least 1" in _error(ARGV + data + VARIABLE + ["--pad-to-multiple-of", "0"],
                                                               capsys)
    assert "--split 0,100,0 gives none of the 16 sequences of --data-path to training" in _error(
        ARGV + data + ["--split", "0,100,0"], capsys)
    pretraining = [arg for arg in ARGV if arg not in ("--stage", "sft", "--is-instruction-dataset")] + ["--mock-data"]
    for flag in (["--prompt-type", "qwen"], VARIABLE, ["--variable-seq-lengths", "--pad-to-multiple-of", "4"],
                 ["--full-shuffle-instruction-dataset"]):
        foreign = flag[-2] if flag[-1] == '4' else flag[0]
        assert f"unrecognized arguments: {' '.join(f for f in flag if f != '--variable-seq-lengths')} " \
               f"({foreign} is a flag of " in _error(pretraining + flag, capsys, "pretrain")


def test_the_log_line_counts_the_positions_each_micro_batch_holds(prefix: str) -> None:
    """Tokens per second (and TFLOP/s) count rows x length of the micro-batches: fewer when they are cut."""
    padded, variable = _trainer(prefix), _trainer(prefix, *VARIABLE, "--pad-to-multiple-of", "2")
    full = padded.args.global_batch_size * SEQ
    assert padded.train_step(padded.train_iterator()).tokens == full
    drawn = itertools.islice(variable.train_iterator(), variable.num_microbatches)
    expected = sum(batch["tokens"].numel() for batch in drawn)
    assert variable.train_step(variable.train_iterator()).tokens == expected < full
