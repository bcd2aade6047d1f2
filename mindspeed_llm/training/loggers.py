"""TensorBoard and Weights & Biases writers for the trainer's scalars (Megatron's tag names).

    writers = build_metric_writers(args, is_writer_rank=rank == world_size - 1)  # the rank with the loss
    for each iteration:
        if writers.wants(iteration):                   # every --tensorboard-log-interval iterations
            writers.scalars(iteration_values(stats), iteration, consumed_samples=samples,
                            timers={"forward-backward": seconds, "optimizer": seconds})
    after each evaluation:
        writers.validation({"lm loss": loss}, iteration, consumed_samples=samples)
    writers.close()

``build_metric_writers`` returns a no-op object when no logger flag is given or on
other ranks; ``scalars`` itself skips iterations that ``wants`` refuses, so
calling it every iteration is also correct. The flags were checked before any
process group existed (``arguments.validate_args``: a directory that is a file, a
missing optional package naming its extra), so every rank fails alike.

Flags:

* ``--tensorboard-dir DIR``: event files through ``torch.utils.tensorboard``
  (needs ``pip install -e .[tensorboard]``), ``--tensorboard-queue-size``
  (default 1000) events buffered before a flush, ``--tensorboard-log-interval N``
  (default 1), ``--log-timers-to-tensorboard`` to write the ``timers``. The flags
  are written once as a text table under the tag ``arguments``.
* ``--wandb-project P [--wandb-exp-name N] [--wandb-save-dir D]``: W&B
  (``pip install -e .[wandb]``), imported only then; offline (``mode="offline"``)
  unless ``WANDB_API_KEY`` or ``WANDB_MODE`` is set; the run directory is
  ``--wandb-save-dir``, else ``<--save>/wandb``; the flags are the run's config.
  W&B gets the same scalars (no "vs samples" variants, no timers unless asked).

Keys of ``scalars(values)`` and the tags they are written under. The named keys
are the fields of ``metrics.IterationStats`` (``iteration_values`` builds the
dict); any other key (a task's named stats, ``IterationStats.other_stats``) is
written under its own name:

    loss               -> "lm loss"      (IterationStats.loss, the line's "lm loss:")
    learning_rate      -> "learning-rate"
    global_batch_size  -> "batch-size"
    loss_scale         -> "loss-scale"
    grad_norm          -> "grad-norm"    (None values are skipped)
    tokens_per_second  -> "tokens-per-sec"
    tflops_per_device  -> "tflops-per-device"
    mfu                -> "mfu"          (a fraction, 0..1)
    memory_gb          -> "mem-max-allocated-gigabytes"
    elapsed_ms         -> "iteration-time-ms"
    skipped_iterations -> "skipped-iterations"
    nan_iterations     -> "nan-iterations"

With ``consumed_samples``, TensorBoard also gets ``"<tag> vs samples"`` (step =
consumed samples) for the losses, learning-rate, batch-size, loss-scale and
grad-norm, as Megatron does. ``timers`` (seconds, e.g. ``"forward-backward"``,
``"optimizer"``) go to ``"<name>-time"``. ``validation(values)`` writes each key
``k`` as ``"k validation"`` and ``"k validation ppl"`` (``exp(min(20, value))``)
at every call, whatever the interval.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import os
from typing import Any, Dict, Mapping, Optional, Sequence

from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.training.metrics import IterationStats

TRAINING_TAGS = {
    "loss": "lm loss",
    "learning_rate": "learning-rate",
    "global_batch_size": "batch-size",
    "loss_scale": "loss-scale",
    "grad_norm": "grad-norm",
    "tokens_per_second": "tokens-per-sec",
    "tflops_per_device": "tflops-per-device",
    "mfu": "mfu",
    "memory_gb": "mem-max-allocated-gigabytes",
    "elapsed_ms": "iteration-time-ms",
    "skipped_iterations": "skipped-iterations",
    "nan_iterations": "nan-iterations",
}
# Tags that also get a "<tag> vs samples" series; every tag not in TRAINING_TAGS (a task's loss) does too.
VS_SAMPLES_TAGS = frozenset({"lm loss", "learning-rate", "batch-size", "loss-scale", "grad-norm"})
TIMER_SUFFIX = "-time"
VALIDATION_SUFFIX = " validation"
PPL_SUFFIX = " validation ppl"
ARGUMENTS_TAG = "arguments"
_BOOKKEEPING_FIELDS = ("iteration", "train_iters", "consumed_samples")
_MAX_PPL_EXPONENT = 20.0  # Megatron's cap before exp()


def iteration_values(stats: IterationStats) -> Dict[str, float]:
    """One iteration's stats keyed by field name, a task's named stats (``other_stats``) by their names.

    None values (no grad norm) and the bookkeeping fields (iteration, train_iters,
    consumed_samples) are left out.
    """
    values: Dict[str, float] = {}
    for item in dataclasses.fields(stats):
        value = getattr(stats, item.name)
        if item.name in _BOOKKEEPING_FIELDS or value is None:
            continue
        if isinstance(value, Mapping):  # a task's statistics besides its loss
            values.update({name: float(stat) for name, stat in value.items()})
        else:
            values[item.name] = float(value)
    return values


def training_tag(key: str) -> str:
    """The tag a ``scalars`` key is written under."""
    return TRAINING_TAGS.get(key, key)


def _tags_for(values: Mapping[str, Optional[float]]) -> Dict[str, float]:
    """Tag -> value for one call, refusing two keys that land on the same tag."""
    tagged: Dict[str, float] = {}
    for key, value in values.items():
        if value is None:
            continue
        tag = training_tag(key)
        if tag in tagged:
            raise ValueError(f"two scalars keys are both written as {tag!r}; pass only one of them")
        tagged[tag] = float(value)
    return tagged


def _wants_vs_samples(tag: str) -> bool:
    return tag in VS_SAMPLES_TAGS or tag not in TRAINING_TAGS.values()


def _plain(value: Any) -> Any:
    """A value W&B's config and a text table can hold."""
    return value if isinstance(value, (bool, int, float, str, type(None))) else str(value)


def _arguments_table(args: argparse.Namespace) -> str:
    rows = [f"| {name} | {_plain(value)} |" for name, value in sorted(vars(args).items())]
    return "\n".join(["| argument | value |", "|---|---|", *rows])


class _TensorBoardSink:
    def __init__(self, log_dir: str, queue_size: int) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:  # tensorboard present but unusable (a version torch refuses)
            raise ArgumentError(f"--tensorboard-dir: torch.utils.tensorboard cannot be used ({error}); "
                                "pip install -e .[tensorboard]") from None
        self.writer = SummaryWriter(log_dir=log_dir, max_queue=queue_size)

    def scalars(self, tagged: Mapping[str, float], step: int) -> None:
        for tag, value in tagged.items():
            self.writer.add_scalar(tag, value, step)

    def text(self, tag: str, text: str, step: int) -> None:
        self.writer.add_text(tag, text, step)

    def close(self) -> None:
        self.writer.close()


class _WandbSink:
    def __init__(self, args: argparse.Namespace) -> None:
        wandb = importlib.import_module("wandb")
        save_dir = getattr(args, "wandb_save_dir", None) or (
            os.path.join(args.save, "wandb") if getattr(args, "save", None) else None)
        if save_dir:
            os.makedirs(save_dir, exist_ok=True)
        offline = not os.environ.get("WANDB_API_KEY") and not os.environ.get("WANDB_MODE")
        self.run = wandb.init(project=args.wandb_project, name=getattr(args, "wandb_exp_name", None),
                              dir=save_dir, config={k: _plain(v) for k, v in vars(args).items()},
                              mode="offline" if offline else None)

    def scalars(self, tagged: Mapping[str, float], step: int) -> None:
        self.run.log(dict(tagged), step=step)

    def close(self) -> None:
        self.run.finish()


class MetricWriters:
    """The configured writers (none, TensorBoard, W&B or both) behind one set of calls."""

    def __init__(self, tensorboard: Optional[_TensorBoardSink] = None, wandb: Optional[_WandbSink] = None,
                 log_interval: int = 1, log_timers: bool = False) -> None:
        if log_interval < 1:
            raise ArgumentError(f"--tensorboard-log-interval must be at least 1, got {log_interval}")
        self.tensorboard, self.wandb = tensorboard, wandb
        self.log_interval, self.log_timers = log_interval, log_timers

    @property
    def enabled(self) -> bool:
        return self.tensorboard is not None or self.wandb is not None

    def wants(self, iteration: int) -> bool:
        """Whether ``scalars`` writes at this iteration (lets the trainer skip gathering values)."""
        return self.enabled and iteration % self.log_interval == 0

    def scalars(self, values: Mapping[str, Optional[float]], iteration: int,
                consumed_samples: Optional[int] = None,
                timers: Optional[Mapping[str, float]] = None) -> None:
        """One iteration's values (keys in the module docstring); written every log interval."""
        if not self.wants(iteration):
            return
        tagged = _tags_for(values)
        vs_samples = [tag for tag in tagged if _wants_vs_samples(tag)]
        if self.log_timers and timers:
            tagged.update({name + TIMER_SUFFIX: float(seconds) for name, seconds in timers.items()})
        self._write(tagged, iteration, consumed_samples, vs_samples)

    def validation(self, values: Mapping[str, float], iteration: int,
                   consumed_samples: Optional[int] = None) -> None:
        """Validation losses by name (e.g. ``{"lm loss": 2.3}``): value and perplexity, every call."""
        if not self.enabled:
            return
        tagged: Dict[str, float] = {}
        for name, value in values.items():
            tagged[name + VALIDATION_SUFFIX] = float(value)
            tagged[name + PPL_SUFFIX] = math.exp(min(_MAX_PPL_EXPONENT, float(value)))
        self._write(tagged, iteration, consumed_samples, list(tagged))

    def text(self, tag: str, text: str, iteration: int = 0) -> None:
        """A text note (TensorBoard only)."""
        if self.tensorboard is not None:
            self.tensorboard.text(tag, text, iteration)

    def _write(self, tagged: Dict[str, float], iteration: int, consumed_samples: Optional[int],
               vs_samples: Sequence[str]) -> None:
        """``tagged`` at the iteration; the ``vs_samples`` tags also against consumed samples (TensorBoard)."""
        if self.tensorboard is not None:
            self.tensorboard.scalars(tagged, iteration)
            if consumed_samples is not None:
                self.tensorboard.scalars({f"{tag} vs samples": tagged[tag] for tag in vs_samples}, consumed_samples)
        if self.wandb is not None:
            self.wandb.scalars(tagged, iteration)

    def close(self) -> None:
        """Flush and close every writer; later calls do nothing."""
        for sink in (self.tensorboard, self.wandb):
            if sink is not None:
                sink.close()
        self.tensorboard = self.wandb = None

    def __enter__(self) -> "MetricWriters":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def build_metric_writers(args: argparse.Namespace, is_writer_rank: bool) -> MetricWriters:
    """Writers for the logger flags in ``args`` (on ``is_writer_rank``; a no-op elsewhere or without flags)."""
    tensorboard_dir = getattr(args, "tensorboard_dir", None)
    wandb_project = getattr(args, "wandb_project", None)
    interval = getattr(args, "tensorboard_log_interval", None) or 1
    log_timers = bool(getattr(args, "log_timers_to_tensorboard", False))
    if not is_writer_rank:
        return MetricWriters(log_interval=interval)
    tensorboard = None
    if tensorboard_dir:
        queue_size = getattr(args, "tensorboard_queue_size", None) or 1000
        tensorboard = _TensorBoardSink(tensorboard_dir, queue_size)
        tensorboard.text(ARGUMENTS_TAG, _arguments_table(args), 0)
    wandb = _WandbSink(args) if wandb_project else None
    return MetricWriters(tensorboard, wandb, interval, log_timers)
