"""tools/plot_loss.py: curves from logs in format_log_line's format and from event files of the metric writers."""
from __future__ import annotations

import sys
from argparse import Namespace
from pathlib import Path
from typing import List, Tuple

import pytest

from mindspeed_llm.training.loggers import build_metric_writers, iteration_values
from mindspeed_llm.training.metrics import IterationStats, format_log_line
from tools import plot_loss

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TRAIN_ITERS = 6


def _stats(iteration: int, loss: float) -> IterationStats:
    return IterationStats(iteration=iteration, train_iters=TRAIN_ITERS, consumed_samples=8 * iteration,
                          elapsed_ms=100.0, learning_rate=1e-4, global_batch_size=8, loss=loss, loss_scale=1.0,
                          grad_norm=1.25, skipped_iterations=0, nan_iterations=0, tokens_per_second=1e3,
                          tflops_per_device=0.1, mfu=0.01, memory_gb=0.5)


def _validation_line(iteration: int, loss: float) -> str:
    """Megatron's validation line, as the trainer prints it."""
    return f" validation loss at iteration {iteration} | lm loss value: {loss:.6E} | lm loss PPL: 1.0E+00 | "


def _write_log(path: Path, losses: List[float], validations: List[Tuple[int, float]]) -> None:
    lines = ["training 1,234 parameters per rank (TP=1, PP=1, DP=1) on cpu; 1 micro-batches per step",
             "WARNING: an unrelated line | lm loss: 99.0 |"]
    for iteration, loss in enumerate(losses, start=1):
        lines.append(format_log_line(_stats(iteration, loss)))
        lines += [_validation_line(it, value) for it, value in validations if it == iteration]
    path.write_text("\n".join(lines) + "\n")


def _printed(value: float) -> float:
    return float(f"{value:.6E}")  # the log line keeps 7 significant digits


def test_plot_from_a_log_writes_a_png_of_the_logged_points(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    losses = [10.5, 9.25, 8.125, 7.1234567, 6.5, 6.0]
    validations = [(3, 8.0), (6, 6.25)]
    log = tmp_path / "run_a.log"
    _write_log(log, losses, validations)
    run = plot_loss.read_log(str(log))
    assert run.train == [(i, _printed(loss)) for i, loss in enumerate(losses, start=1)]
    assert run.valid == validations
    out = tmp_path / "plots" / "loss.png"
    assert plot_loss.main([str(log), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_SIGNATURE
    printed = capsys.readouterr().out
    assert "run_a.log: 6 training points" in printed and "2 validation points" in printed


def _write_events(log_dir: Path, losses: List[float], validation: Tuple[int, float]) -> None:
    args = Namespace(tensorboard_dir=str(log_dir), tensorboard_log_interval=2)
    with build_metric_writers(args, is_writer_rank=True) as writers:
        for iteration, loss in enumerate(losses, start=1):
            writers.scalars(iteration_values(_stats(iteration, loss)), iteration)
            if iteration == validation[0]:
                writers.validation({"lm loss": validation[1]}, iteration)


def test_plot_from_event_dirs_and_a_log_one_curve_each(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    pytest.importorskip("tensorboard")
    losses = [4.0, 3.5, 3.0, 2.5]
    _write_events(tmp_path / "tb" / "run_b", losses, (4, 2.75))
    _write_events(tmp_path / "tb" / "run_c", [5.0, 4.0, 3.0, 2.0], (2, 4.5))
    log = tmp_path / "run_a.log"
    _write_log(log, [6.0, 5.0], [])
    runs = plot_loss.read_runs([str(log), str(tmp_path / "tb")])  # a parent dir: one run per subdirectory
    assert [run.label for run in runs] == ["run_a.log", "run_b", "run_c"]
    assert runs[1].train == [(2, 3.5), (4, 2.5)]  # --tensorboard-log-interval 2
    assert runs[1].valid == [(4, 2.75)] and runs[2].valid == [(2, 4.5)]
    out = tmp_path / "loss.png"
    assert plot_loss.main([str(log), str(tmp_path / "tb" / "run_b"), "--out", str(out), "--logy"]) == 0
    assert out.read_bytes()[:8] == PNG_SIGNATURE


def test_a_resumed_run_appending_to_its_log_keeps_the_latest_values(tmp_path):
    log = tmp_path / "run.log"
    _write_log(log, [5.0, 4.0, 3.0, 2.0], [(2, 4.5)])
    with open(log, "a") as handle:  # resumed from the checkpoint at iteration 2
        handle.write("\n".join(format_log_line(_stats(it, loss)) for it, loss in ((3, 3.5), (4, 2.5), (5, 1.5))))
        handle.write("\n" + _validation_line(4, 2.25) + "\n")
    run = plot_loss.read_log(str(log))
    assert run.train == [(1, 5.0), (2, 4.0), (3, 3.5), (4, 2.5), (5, 1.5)]
    assert run.valid == [(2, 4.5), (4, 2.25)]


def test_same_file_names_are_told_apart_by_path(tmp_path):
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        _write_log(tmp_path / run / "train.log", [2.0], [])
    labels = [run.label for run in plot_loss.read_runs([str(tmp_path / "a" / "train.log"),
                                                         str(tmp_path / "b" / "train.log")])]
    assert labels == [str(tmp_path / "a" / "train.log"), str(tmp_path / "b" / "train.log")]


def _error(argv: List[str], capsys) -> str:
    assert plot_loss.main(argv) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("error: ") and "\n" not in message
    return message


def test_bad_input_gives_one_line_errors(tmp_path, capsys):
    missing = tmp_path / "missing.log"
    assert str(missing) in _error([str(missing), "--out", str(tmp_path / "x.png")], capsys)
    not_a_log = tmp_path / "notes.txt"
    not_a_log.write_text("hello\niteration without numbers\n")
    message = _error([str(not_a_log), "--out", str(tmp_path / "x.png")], capsys)
    assert str(not_a_log) in message and "lm loss" in message
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    assert "event files" in _error([str(empty_dir)], capsys)
    assert not (tmp_path / "x.png").exists()


def test_missing_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    log = tmp_path / "run.log"
    _write_log(log, [3.0, 2.0], [])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert "pip install -e .[plot]" in _error([str(log), "--out", str(tmp_path / "loss.png")], capsys)
