"""Plot loss curves of one or more training runs from their logs or TensorBoard event files.

    python tools/plot_loss.py run1/train.log run2/train.log --out loss.png
    python tools/plot_loss.py tb/run1 tb/run2 --out loss.png          # --tensorboard-dir of each run
    python tools/plot_loss.py train.log --key "lm loss" --logy --out loss.png

Each PATH is one run, drawn as one curve labelled with its file or directory name:

* a file: the training log (stdout of ``pretrain_gpt.py``; Megatron's logs work too).
  Training points come from the iteration lines (``iteration N/ M | ... | lm loss: X |``,
  see ``format_log_line`` in ``mindspeed_llm/training/metrics.py``), validation points from
  ``validation loss at iteration N | lm loss value: X |``; an iteration logged again (a
  resumed run appending to the same log) keeps its latest value;
* a directory: TensorBoard event files written by ``--tensorboard-dir`` (tags ``lm loss``
  and ``lm loss validation``, see ``mindspeed_llm/training/loggers.py``); a directory
  whose subdirectories hold the event files gives one run per subdirectory.

``--key`` plots another logged value (a task's statistic, e.g. ``--key "rewards/accuracy"``).
Validation points are drawn as markers in their run's colour. Writes the PNG (or any
format matplotlib knows from ``--out``'s suffix) and prints one line per run.
Needs matplotlib (``pip install -e .[plot]``); event files need tensorboard
(``pip install -e .[tensorboard]``). Errors (a missing path, a log without loss lines)
print ``error: ...`` and exit with code 2.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Iterable, List, Optional, Sequence, Tuple

DEFAULT_KEY = "lm loss"
EVENT_FILE_MARKER = "tfevents"
_ITERATION = re.compile(r"\biteration\s+(\d+)/\s*\d+\s*\|")
_VALIDATION = re.compile(r"validation loss at iteration\s+(\d+)\s*\|")

Point = Tuple[int, float]


class PlotError(ValueError):
    """A path or file that gives no curve; the message names it."""


@dataclass
class Run:
    label: str
    train: List[Point] = field(default_factory=list)
    valid: List[Point] = field(default_factory=list)


def _value_after(line: str, name: str) -> Optional[float]:
    """The number logged as ``| name: X |`` in ``line`` (None when absent)."""
    match = re.search(r"\|\s*" + re.escape(name) + r":\s*([^\s|]+)", line)
    return None if match is None else float(match.group(1))


def parse_log(lines: Iterable[str], key: str = DEFAULT_KEY) -> Run:
    """Training and validation points of ``key`` in a training log's lines."""
    run = Run(label="")
    for line in lines:
        iteration = _ITERATION.search(line)
        if iteration is not None:
            value = _value_after(line, key)
            if value is not None:
                run.train.append((int(iteration.group(1)), value))
            continue
        validation = _VALIDATION.search(line)
        if validation is not None:
            value = _value_after(line, f"{key} value")
            if value is not None:
                run.valid.append((int(validation.group(1)), value))
    return run


def latest_per_iteration(points: Iterable[Point]) -> List[Point]:
    """Sorted by iteration, the last value logged for each (a resumed run re-logs iterations)."""
    return sorted(dict(points).items())


def read_log(path: str, key: str = DEFAULT_KEY) -> Run:
    """The run logged in ``path``; iterations logged again after a resume keep their latest value."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        run = parse_log(handle, key)
    run.train, run.valid = latest_per_iteration(run.train), latest_per_iteration(run.valid)
    if not run.train and not run.valid:
        raise PlotError(f"{path}: no '{key}' values on 'iteration N/ M | ... | {key}: X |' lines; "
                        "is it the log of a training run (or pass --key)?")
    return run


def event_dirs(path: str) -> List[str]:
    """``path`` if it holds event files, else its subdirectories that do (sorted)."""
    found = [root for root, _, files in os.walk(path) if any(EVENT_FILE_MARKER in name for name in files)]
    if path in found:
        return [path]
    return sorted(found)


def _event_accumulator():
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        raise PlotError("reading TensorBoard event files needs tensorboard: pip install -e .[tensorboard]") from None
    return EventAccumulator


def read_event_dir(path: str, key: str = DEFAULT_KEY) -> Run:
    """Points of the scalar tags ``key`` and ``key validation`` in one directory of event files."""
    events = _event_accumulator()(path, size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    tags = set(events.Tags()["scalars"])
    run = Run(label="")
    for tag, points in ((key, run.train), (f"{key} validation", run.valid)):
        if tag in tags:
            points.extend((event.step, event.value) for event in events.Scalars(tag))
    if not run.train and not run.valid:
        raise PlotError(f"{path}: no '{key}' scalars in the event files (tags: {sorted(tags) or 'none'})")
    return run


def read_runs(paths: Sequence[str], key: str = DEFAULT_KEY) -> List[Run]:
    """One run per log file, per event directory (and per subdirectory holding event files)."""
    sources: List[Tuple[str, bool]] = []  # (path, is an event directory)
    for path in paths:
        if os.path.isfile(path):
            sources.append((path, False))
        elif os.path.isdir(path):
            found = event_dirs(path)
            if not found:
                raise PlotError(f"{path}: a directory without TensorBoard event files (*{EVENT_FILE_MARKER}*)")
            sources.extend((directory, True) for directory in found)
        else:
            raise PlotError(f"{path}: no such file or directory")
    runs = []
    for (path, is_events), label in zip(sources, _labels([path for path, _ in sources])):
        run = read_event_dir(path, key) if is_events else read_log(path, key)
        run.label = label
        runs.append(run)
    return runs


def _labels(paths: Sequence[str]) -> List[str]:
    """File or directory names, or the paths as given where two names are the same."""
    names = [os.path.basename(os.path.normpath(path)) for path in paths]
    return [name if names.count(name) == 1 else os.path.normpath(path) for name, path in zip(names, paths)]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("plotting needs matplotlib: pip install -e .[plot]") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_runs(runs: Sequence[Run], out: str, key: str = DEFAULT_KEY, logy: bool = False) -> None:
    """One curve per run, its validation points as markers of the same colour."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 5))
    for run in runs:
        color = None
        if run.train:
            steps, values = zip(*run.train)
            (line,) = axes.plot(steps, values, label=run.label, linewidth=1.2)
            color = line.get_color()
        if run.valid:
            steps, values = zip(*run.valid)
            axes.plot(steps, values, "o", color=color, markersize=5, label=f"{run.label} (validation)")
    axes.set_xlabel("iteration")
    axes.set_ylabel(key)
    if logy:
        axes.set_yscale("log")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def _summary(run: Run) -> str:
    last = next((value for _, value in reversed(run.train) if math.isfinite(value)), float("nan"))
    return f"{run.label}: {len(run.train)} training points (last {last:.4f}), {len(run.valid)} validation points"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Plot loss curves from training logs or TensorBoard event files.")
    parser.add_argument("paths", nargs="+", metavar="LOG_OR_TB_DIR", help="one run per training log or event dir")
    parser.add_argument("--out", default="loss.png", help="image to write (default loss.png)")
    parser.add_argument("--key", default=DEFAULT_KEY, help=f"logged value to plot (default {DEFAULT_KEY!r})")
    parser.add_argument("--logy", action="store_true", help="logarithmic y axis")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        runs = read_runs(args.paths, args.key)
        plot_runs(runs, args.out, args.key, args.logy)
    except PlotError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for run in runs:
        print(_summary(run))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
