"""TensorBoard and W&B writers: event files read back with tensorboard's reader, W&B through a fake module."""
from __future__ import annotations

import math
import sys
import types
from argparse import Namespace
from typing import Any, Dict, List

import pytest

from mindspeed_llm.training.loggers import build_metric_writers, iteration_values
from mindspeed_llm.training.metrics import IterationStats

GBS = 4


def _stats(iteration: int, grad_norm: float = None) -> IterationStats:
    return IterationStats(iteration=iteration, train_iters=6, consumed_samples=GBS * iteration,
                          elapsed_ms=120.0 + iteration,
                          learning_rate=1e-4 * iteration, global_batch_size=GBS, loss=10.0 / iteration,
                          loss_scale=1.0, grad_norm=grad_norm, skipped_iterations=0, nan_iterations=0,
                          tokens_per_second=1000.0 + iteration, tflops_per_device=0.5, mfu=0.25, memory_gb=1.5)


def _args(**overrides: Any) -> Namespace:
    options = dict(tensorboard_dir=None, tensorboard_log_interval=1, tensorboard_queue_size=1000,
                   log_timers_to_tensorboard=False, wandb_project=None, wandb_exp_name=None, wandb_save_dir=None,
                   save=None, lr=1e-3)
    options.update(overrides)
    return Namespace(**options)


def _run(writers, iterations: int, validate_at: int = 4) -> None:
    for iteration in range(1, iterations + 1):
        writers.scalars(iteration_values(_stats(iteration, grad_norm=0.5 * iteration)), iteration,
                        consumed_samples=GBS * iteration, timers={"forward-backward": 0.1 * iteration,
                                                                   "optimizer": 0.01})
        if iteration == validate_at:
            writers.validation({"lm loss": 2.0}, iteration, consumed_samples=GBS * iteration)
    writers.close()


def _read_scalars(log_dir: str) -> Dict[str, List[tuple]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(log_dir)
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _tensor_tags(log_dir: str) -> List[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(log_dir)
    events.Reload()
    return events.Tags()["tensors"]


def test_tensorboard_holds_the_scalars_at_the_logged_iterations(tmp_path):
    pytest.importorskip("tensorboard")
    log_dir = str(tmp_path / "tb")
    _run(build_metric_writers(_args(tensorboard_dir=log_dir, tensorboard_log_interval=2,
                                    log_timers_to_tensorboard=True), is_writer_rank=True), iterations=5)
    scalars = _read_scalars(log_dir)
    logged = (2, 4)  # every --tensorboard-log-interval 2 of iterations 1..5
    expected = {
        "lm loss": [10.0 / i for i in logged], "learning-rate": [1e-4 * i for i in logged],
        "grad-norm": [0.5 * i for i in logged], "loss-scale": [1.0, 1.0], "batch-size": [GBS, GBS],
        "tokens-per-sec": [1000.0 + i for i in logged], "tflops-per-device": [0.5, 0.5], "mfu": [0.25, 0.25],
        "mem-max-allocated-gigabytes": [1.5, 1.5], "iteration-time-ms": [120.0 + i for i in logged],
        "skipped-iterations": [0, 0], "nan-iterations": [0, 0],
        "forward-backward-time": [0.1 * i for i in logged], "optimizer-time": [0.01, 0.01],
    }
    for tag, values in expected.items():
        assert [step for step, _ in scalars[tag]] == list(logged), tag
        assert [value for _, value in scalars[tag]] == pytest.approx(values, rel=1e-6), tag
    for tag in ("lm loss", "learning-rate", "batch-size", "loss-scale", "grad-norm"):
        assert [step for step, _ in scalars[f"{tag} vs samples"]] == [GBS * i for i in logged], tag
    assert "tokens-per-sec vs samples" not in scalars and "optimizer-time vs samples" not in scalars
    assert scalars["lm loss validation"] == [(4, 2.0)]  # validation ignores the interval
    assert scalars["lm loss validation ppl"] == [(4, pytest.approx(math.exp(2.0), rel=1e-6))]
    assert scalars["lm loss validation vs samples"] == [(4 * GBS, 2.0)]
    assert "arguments/text_summary" in _tensor_tags(log_dir)


def test_tensorboard_without_timers_flag_and_without_grad_norm(tmp_path):
    pytest.importorskip("tensorboard")
    log_dir = str(tmp_path / "tb")
    writers = build_metric_writers(_args(tensorboard_dir=log_dir), is_writer_rank=True)
    assert writers.wants(1) and writers.wants(3)
    for iteration in (1, 2, 3):
        writers.scalars(iteration_values(_stats(iteration)), iteration, timers={"optimizer": 0.5})
    writers.close()
    scalars = _read_scalars(log_dir)
    assert [step for step, _ in scalars["lm loss"]] == [1, 2, 3]
    assert "grad-norm" not in scalars and "optimizer-time" not in scalars
    assert not any(tag.endswith("vs samples") for tag in scalars)  # no consumed_samples given


def test_task_stats_keep_their_names_and_duplicate_tags_are_refused(tmp_path):
    pytest.importorskip("tensorboard")
    log_dir = str(tmp_path / "tb")
    stats = _stats(1)
    stats.other_stats = {"rewards/accuracy": 0.5, "rewards/margin": 0.25}
    values = iteration_values(stats)
    assert values["rewards/accuracy"] == 0.5 and "other_stats" not in values and "iteration" not in values
    with build_metric_writers(_args(tensorboard_dir=log_dir), is_writer_rank=True) as writers:
        writers.scalars(values, 1)
        writers.scalars({"dpo loss": 0.7}, 2)
        with pytest.raises(ValueError, match="lm loss"):
            writers.scalars({"loss": 1.0, "lm loss": 1.0}, 2)
    scalars = _read_scalars(log_dir)
    assert scalars["dpo loss"] == [(2, pytest.approx(0.7))]
    assert scalars["rewards/accuracy"] == [(1, 0.5)] and scalars["rewards/margin"] == [(1, 0.25)]
    assert scalars["lm loss"] == [(1, 10.0)]


def test_no_flags_and_other_ranks_write_nothing(tmp_path):
    writers = build_metric_writers(_args(), is_writer_rank=True)
    assert not writers.enabled and not writers.wants(1)
    writers.scalars({"loss": 1.0}, 1)
    writers.validation({"lm loss": 1.0}, 1)
    writers.close()
    log_dir = tmp_path / "tb"
    other_rank = build_metric_writers(_args(tensorboard_dir=str(log_dir)), is_writer_rank=False)
    _run(other_rank, iterations=2)
    assert not log_dir.exists()


class _FakeWandb(types.ModuleType):
    """Records wandb.init and run.log / run.finish calls."""

    def __init__(self) -> None:
        super().__init__("wandb")
        self.init_kwargs: Dict[str, Any] = {}
        self.logged: List[tuple] = []
        self.finished = False

    def init(self, **kwargs: Any) -> "_FakeWandb":
        self.init_kwargs = kwargs
        return self

    def log(self, values: Dict[str, float], step: int) -> None:
        self.logged.append((step, dict(values)))

    def finish(self) -> None:
        self.finished = True


def test_wandb_offline_without_a_key_gets_the_same_scalars(monkeypatch, tmp_path):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    args = _args(wandb_project="proj", wandb_exp_name="run-1", save=str(tmp_path / "ckpt"),
                 tensorboard_log_interval=2)
    _run(build_metric_writers(args, is_writer_rank=True), iterations=4)
    kwargs = fake.init_kwargs
    assert kwargs["project"] == "proj" and kwargs["name"] == "run-1" and kwargs["mode"] == "offline"
    assert kwargs["dir"] == str(tmp_path / "ckpt" / "wandb") and (tmp_path / "ckpt" / "wandb").is_dir()
    assert kwargs["config"]["lr"] == 1e-3
    assert [step for step, _ in fake.logged] == [2, 4, 4]  # iterations 2 and 4, then validation at 4
    step, values = fake.logged[1]
    assert values["lm loss"] == pytest.approx(2.5) and values["learning-rate"] == pytest.approx(4e-4)
    assert values["grad-norm"] == pytest.approx(2.0) and "forward-backward-time" not in values
    assert fake.logged[2][1] == {"lm loss validation": 2.0, "lm loss validation ppl": pytest.approx(math.exp(2.0))}
    assert fake.finished


def test_wandb_online_with_a_key_and_its_own_save_dir(monkeypatch, tmp_path):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_API_KEY", "k")
    save_dir = tmp_path / "wb"
    build_metric_writers(_args(wandb_project="proj", wandb_save_dir=str(save_dir)), is_writer_rank=True).close()
    assert fake.init_kwargs["mode"] is None and fake.init_kwargs["dir"] == str(save_dir)
    assert fake.finished
