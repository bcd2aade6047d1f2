"""--check-for-nan-in-loss-and-grad (on by default) and --max-skipped-iterations.

A step whose loss or gradient norm is NaN/Inf applies no update: it is counted as skipped and logged, the
weights and the optimizer stay as they were, and training goes on; without the check the NaN reaches the
weights. ``--lr 1e6`` (the issue's case) stops with one line after N such steps in a row, and every
checkpoint it saved holds finite weights; a save of weights that turned non-finite anyway is an error naming
the weight (unless --no-check-for-nan-in-loss-and-grad). Token ids outside the vocabulary, a cause of inf
losses at TP > 1, are named before the first step (the corpus scan of tests/unit/test_corpus_vocabulary.py;
the per-batch check stays as a backstop), in one line through the entry point.
"""
from __future__ import annotations

import glob
import math
from typing import Dict, List

import pytest
import torch

from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.training import pretrain, run, setup

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "6",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1",
]


def _inject(trainer, at_step: int, where: str) -> None:
    """Poison the step ``at_step`` (1-based): the loss the backward sees (a NaN gradient) or the logged loss."""
    forward_step = trainer.task.forward_step

    def poisoned(batch, model):
        loss, stats = forward_step(batch, model)
        if trainer.iteration + 1 == at_step:
            if where == "grad":
                loss = loss * float("nan")
            else:
                stats = {**stats, "lm loss": stats["lm loss"] * float("inf")}
        return loss, stats

    trainer.task.forward_step = poisoned


def _weights(trainer) -> Dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainer.model.named_parameters()}


@pytest.mark.parametrize("where", ["grad", "loss"])
def test_a_non_finite_step_is_skipped_and_training_goes_on(capsys, where: str) -> None:
    trainer = setup(ARGV)
    _inject(trainer, 3, where)
    iterator = trainer.train_iterator()
    results = [trainer.train_step(iterator) for _ in range(2)]
    before = _weights(trainer)
    skipped = trainer.train_step(iterator)
    assert not skipped.applied and trainer.skipped_iterations == 1
    for name, value in _weights(trainer).items():
        assert torch.equal(value, before[name]), f"{name} changed in a skipped step"
    results += [trainer.train_step(iterator) for _ in range(3)]
    assert all(r.applied and math.isfinite(r.loss) for r in results)
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert trainer.non_finite_in_a_row == 0
    assert "iteration 3 skipped" in capsys.readouterr().out


def test_without_the_check_the_nan_reaches_the_weights() -> None:
    trainer = setup(ARGV + ["--no-check-for-nan-in-loss-and-grad"])
    _inject(trainer, 1, "grad")
    trainer.train_step(trainer.train_iterator())
    assert not all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_a_diverging_run_stops_and_saves_only_finite_weights(tmp_path, capsys) -> None:
    save = str(tmp_path / "ckpt")
    argv = ARGV + ["--lr", "1e6", "--clip-grad", "0", "--train-iters", "40", "--save", save, "--save-interval", "1",
                   "--max-skipped-iterations", "3"]
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "3 iterations in a row" in err and "--max-skipped-iterations 3" in err
    files = glob.glob(f"{save}/iter_*/mp_rank_*/model_optim_rng.pt")
    assert files
    for path in files:
        state = torch.load(path, map_location="cpu", weights_only=False)["model"]
        for name, value in state.items():
            if torch.is_tensor(value) and value.is_floating_point():
                assert torch.isfinite(value).all(), f"{path}: {name} is not finite"


@pytest.mark.parametrize("extra, message", [
    (["--max-skipped-iterations", "0"], "--max-skipped-iterations must be at least 1"),
    (["--no-check-for-nan-in-loss-and-grad", "--max-skipped-iterations", "5"], "--max-skipped-iterations has no effect"),
])
def test_bad_flags_are_refused(extra: List[str], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        validate_args(parse_args(ARGV + extra), 1)


def test_token_ids_outside_the_vocabulary_are_named(tmp_path, capsys) -> None:
    """Data tokenized with a larger vocabulary stops before its first step with the cause, not an inf loss."""
    import numpy as np

    from core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix = str(tmp_path / "corpus_text_document")
    builder = IndexedDatasetBuilder(prefix + ".bin", np.int32)
    for first in range(0, 400, 40):
        builder.add_item(np.arange(first, first + 40) % 100)  # ids up to 99; the run's vocabulary has 64
        builder.end_document()
    builder.finalize(prefix + ".idx")
    argv = [a for a in ARGV if a != "--mock-data"] + ["--data-path", prefix, "--split", "100,0,0",
                                                      "--data-cache-path", str(tmp_path / "cache")]
    trainer = setup(argv)
    with pytest.raises(ValueError, match=r"token id 9\d, outside the vocabulary of 64 ids \(--data-path "):
        trainer.train_step(trainer.train_iterator())
    # through the entry point, found in a DataLoader worker: one line (not the worker's traceback), exit 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        pretrain(argv + ["--num-workers", "1"])
    assert stopped.value.code == 1
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: the training data holds token id 9"), err


@pytest.mark.parametrize("fmt", ["torch", "torch_dist"])
def test_a_checkpoint_never_holds_non_finite_weights_without_the_opt_out(tmp_path, capsys, fmt: str) -> None:
    """Weights that turned NaN/Inf (a finite loss and norm, a huge update) are not saved: the save is an error
    naming the weight and the previous checkpoint stays the newest; --no-check-for-nan-in-loss-and-grad saves."""
    import torch

    from core import checkpointing

    save = str(tmp_path / "ckpt")
    trainer = setup(ARGV + ["--save", save, "--ckpt-format", fmt])
    trainer.train_step(trainer.train_iterator())
    trainer.iteration = 1
    trainer.save()
    with torch.no_grad():
        dict(trainer.model.named_parameters())["decoder.layers.1.mlp.linear_fc2.weight"][0, 0] = float("inf")
    trainer.iteration = 2
    with pytest.raises(checkpointing.CheckpointError, match=r"iteration 2: the weight "
                       r"decoder\.layers\.1\.mlp\.linear_fc2\.weight \(rank 0\) holds NaN/Inf, so it is not saved"):
        trainer.save()
    assert checkpointing.read_tracker(save) == (1, False) and checkpointing.complete_iterations(save) == [1]

    opted_out = setup(ARGV + ["--save", str(tmp_path / "out"), "--no-check-for-nan-in-loss-and-grad"])
    with torch.no_grad():
        next(opted_out.model.parameters()).fill_(float("nan"))
    opted_out.iteration = 1
    opted_out.save()
    assert "saving NaN/Inf weights" in capsys.readouterr().out
    assert checkpointing.read_tracker(str(tmp_path / "out")) == (1, False)
