"""OptimizerParamScheduler against closed-form learning rates and weight decays."""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import List

import pytest
import torch

from mindspeed_llm.training.lr_scheduler import OptimizerParamScheduler, scheduler_from_args

MAX_LR, MIN_LR, INIT_LR = 1.0e-3, 1.0e-4, 1.0e-5
WARMUP, DECAY = 10, 110


def _optimizer(num_groups: int = 1, **group_options) -> torch.optim.Optimizer:
    groups = [{"params": [torch.nn.Parameter(torch.zeros(2))], **group_options} for _ in range(num_groups)]
    return torch.optim.AdamW(groups, lr=0.0)


def _scheduler(style: str, optimizer: torch.optim.Optimizer = None, **kwargs) -> OptimizerParamScheduler:
    options = dict(init_lr=INIT_LR, max_lr=MAX_LR, min_lr=MIN_LR, lr_warmup_steps=WARMUP,
                   lr_decay_steps=DECAY, lr_decay_style=style)
    options.update(kwargs)
    return OptimizerParamScheduler(optimizer or _optimizer(), **options)


def _lr_at(scheduler: OptimizerParamScheduler, step: int) -> float:
    scheduler.step(step - scheduler.num_steps)
    return scheduler.optimizer.param_groups[0]["lr"]


def _decay_ratio(step: int) -> float:
    return (step - WARMUP) / (DECAY - WARMUP)


@pytest.mark.parametrize("style", ["constant", "linear", "cosine", "inverse-square-root"])
def test_linear_warmup(style: str) -> None:
    scheduler = _scheduler(style)
    assert scheduler.optimizer.param_groups[0]["lr"] == pytest.approx(INIT_LR)  # set at construction
    for step in (1, 5, 10):
        expected = INIT_LR + (MAX_LR - INIT_LR) * step / WARMUP
        assert _lr_at(scheduler, step) == pytest.approx(expected, rel=1e-12)


def test_no_warmup_starts_at_max_lr() -> None:
    scheduler = _scheduler("linear", lr_warmup_steps=0)
    assert scheduler.get_lr() == pytest.approx(MAX_LR)


def test_constant() -> None:
    scheduler = _scheduler("constant")
    for step in (11, 60, 110, 500):
        assert _lr_at(scheduler, step) == pytest.approx(MAX_LR)


def test_linear() -> None:
    scheduler = _scheduler("linear")
    for step in (11, 35, 60, 99, 110):
        expected = MIN_LR + (1.0 - _decay_ratio(step)) * (MAX_LR - MIN_LR)
        assert _lr_at(scheduler, step) == pytest.approx(expected, rel=1e-12)
    assert _lr_at(scheduler, 60) == pytest.approx((MAX_LR + MIN_LR) / 2)


def test_cosine() -> None:
    scheduler = _scheduler("cosine")
    for step in (11, 35, 60, 85, 110):
        expected = MIN_LR + 0.5 * (math.cos(math.pi * _decay_ratio(step)) + 1.0) * (MAX_LR - MIN_LR)
        assert _lr_at(scheduler, step) == pytest.approx(expected, rel=1e-12)
    assert _lr_at(scheduler, 60) == pytest.approx((MAX_LR + MIN_LR) / 2)


def test_inverse_square_root() -> None:
    scheduler = _scheduler("inverse-square-root", min_lr=0.0)
    for step in (11, 40, 90, 110):
        assert _lr_at(scheduler, step) == pytest.approx(MAX_LR * math.sqrt(WARMUP) / math.sqrt(step))
    floored = _scheduler("inverse-square-root", min_lr=5e-4)
    assert _lr_at(floored, 90) == pytest.approx(5e-4)  # 1e-3 * sqrt(10/90) = 3.3e-4 < min_lr


@pytest.mark.parametrize("style", ["linear", "cosine", "inverse-square-root"])
def test_min_lr_after_decay_steps(style: str) -> None:
    scheduler = _scheduler(style)
    for step in (111, 200, 10_000):
        assert _lr_at(scheduler, step) == pytest.approx(MIN_LR)


WSD_STEPS = 40
WSD_COEFF = {
    "linear": lambda q: 1.0 - q,
    "cosine": lambda q: 0.5 * (math.cos(math.pi * q) + 1.0),
    "exponential": lambda q: 2.0 * 0.5**q - 1.0,
    "minus_sqrt": lambda q: 1.0 - math.sqrt(q),
}


@pytest.mark.parametrize("wsd_style", sorted(WSD_COEFF))
def test_wsd(wsd_style: str) -> None:
    scheduler = _scheduler("WSD", wsd_decay_steps=WSD_STEPS, lr_wsd_decay_style=wsd_style)
    assert _lr_at(scheduler, 5) == pytest.approx(INIT_LR + (MAX_LR - INIT_LR) * 0.5)  # warmup
    anneal_start = DECAY - WSD_STEPS  # 70
    for step in (11, 40, anneal_start):
        assert _lr_at(scheduler, step) == pytest.approx(MAX_LR)  # stable
    for step in (71, 80, 90, 100, 110):
        q = (step - anneal_start) / WSD_STEPS
        expected = MIN_LR + WSD_COEFF[wsd_style](q) * (MAX_LR - MIN_LR)
        assert _lr_at(scheduler, step) == pytest.approx(expected, rel=1e-12)
    assert _lr_at(scheduler, 110) == pytest.approx(MIN_LR)
    assert _lr_at(scheduler, 150) == pytest.approx(MIN_LR)


def test_lr_mult_wd_mult_and_group_bounds() -> None:
    optimizer = torch.optim.AdamW([
        {"params": [torch.nn.Parameter(torch.zeros(2))]},
        {"params": [torch.nn.Parameter(torch.zeros(2))], "lr_mult": 0.1, "wd_mult": 0.0},
        {"params": [torch.nn.Parameter(torch.zeros(2))], "max_lr": 2e-3, "min_lr": 0.0},
    ], lr=0.0)
    scheduler = _scheduler("linear", optimizer, start_wd=0.1, end_wd=0.1)
    scheduler.step(60)
    base = MIN_LR + 0.5 * (MAX_LR - MIN_LR)
    lrs = [group["lr"] for group in optimizer.param_groups]
    assert lrs == pytest.approx([base, 0.1 * base, 1e-3])
    assert [group["weight_decay"] for group in optimizer.param_groups] == pytest.approx([0.1, 0.0, 0.1])
    assert scheduler.get_lr() == pytest.approx(base)


@pytest.mark.parametrize("style", ["linear", "cosine"])
def test_weight_decay_increment(style: str) -> None:
    scheduler = _scheduler("constant", start_wd=0.0, end_wd=0.1, wd_incr_steps=100, wd_incr_style=style)
    for step in (0, 25, 50, 100, 150):
        scheduler.step(step - scheduler.num_steps)
        ratio = min(step / 100, 1.0)
        coeff = ratio if style == "linear" else 0.5 * (math.cos(math.pi * (1 - ratio)) + 1.0)
        assert scheduler.optimizer.param_groups[0]["weight_decay"] == pytest.approx(0.1 * coeff, abs=1e-15)


def _lr_sequence(scheduler: OptimizerParamScheduler, steps: int) -> List[float]:
    values = []
    for _ in range(steps):
        scheduler.step()
        values.append(scheduler.optimizer.param_groups[0]["lr"])
    return values


@pytest.mark.parametrize("style", ["linear", "cosine", "WSD", "inverse-square-root"])
def test_state_dict_round_trip_continues_identically(style: str) -> None:
    options = dict(wsd_decay_steps=WSD_STEPS, lr_wsd_decay_style="cosine") if style == "WSD" else {}
    reference = _scheduler(style, **options)
    _lr_sequence(reference, 37)
    state = reference.state_dict()
    lr_at_save = reference.optimizer.param_groups[0]["lr"]
    expected = _lr_sequence(reference, 100)

    # A fresh scheduler built with other flags takes the checkpoint's schedule and step when asked to.
    resumed = _scheduler("constant", max_lr=5.0, min_lr=0.0, lr_warmup_steps=0)
    resumed.load_state_dict(state, use_checkpoint=True)
    assert resumed.num_steps == 37
    assert resumed.optimizer.param_groups[0]["lr"] == lr_at_save
    assert _lr_sequence(resumed, 100) == expected


def test_state_dict_is_plain_and_override_keeps_current() -> None:
    reference = _scheduler("cosine")
    reference.step(20)
    state = reference.state_dict()
    assert all(isinstance(v, (int, float, str, type(None))) for v in state.values())
    overridden = _scheduler("linear")
    overridden.load_state_dict(state, override=True)
    assert overridden.num_steps == 20 and overridden.lr_decay_style == "linear"
    assert overridden.get_lr() == pytest.approx(MIN_LR + (1 - 0.1) * (MAX_LR - MIN_LR))


def _saved_cosine_at(step: int) -> dict:
    saved = _scheduler("cosine")
    saved.step(step)
    return saved.state_dict()


def test_resume_with_the_same_flags_continues_identically() -> None:
    reference = _scheduler("cosine")
    _lr_sequence(reference, 30)
    state = reference.state_dict()
    expected = _lr_sequence(reference, 20)
    resumed = _scheduler("cosine")
    resumed.load_state_dict(state)
    assert resumed.num_steps == 30
    assert _lr_sequence(resumed, 20) == expected


@pytest.mark.parametrize("kwargs, setting, flag", [
    (dict(max_lr=2e-3), "max_lr", "--lr"),
    (dict(min_lr=0.0), "min_lr", "--min-lr"),
    (dict(lr_warmup_steps=5), "lr_warmup_steps", "--lr-warmup-iters"),
    (dict(lr_decay_steps=220), "lr_decay_steps", "--lr-decay-iters"),
    (dict(lr_decay_style="linear"), "lr_decay_style", "--lr-decay-style"),
    (dict(lr_decay_style="WSD", wsd_decay_steps=20, lr_wsd_decay_style="linear"), "wsd_decay_steps",
     "--lr-wsd-decay-iters"),
    (dict(start_wd=0.1, end_wd=0.1), "start_wd", "--start-weight-decay"),
])
def test_resume_refuses_a_different_schedule(kwargs: dict, setting: str, flag: str) -> None:
    state = _saved_cosine_at(20)
    scheduler = _scheduler("cosine", **kwargs)
    lr_before = scheduler.optimizer.param_groups[0]["lr"]
    with pytest.raises(ValueError) as error:
        scheduler.load_state_dict(state)
    message = str(error.value)
    assert "\n" not in message and setting in message and flag in message
    assert "--override-opt-param-scheduler" in message and "--use-checkpoint-opt_param-scheduler" in message
    assert scheduler.num_steps == 0 and scheduler.optimizer.param_groups[0]["lr"] == lr_before  # untouched


def test_override_keeps_the_flags_schedule_and_restores_the_step() -> None:
    state = _saved_cosine_at(20)
    scheduler = _scheduler("linear", max_lr=2e-3, lr_decay_steps=210)
    scheduler.load_state_dict(state, override=True)
    assert scheduler.num_steps == 20
    assert (scheduler.lr_decay_style, scheduler.max_lr, scheduler.lr_decay_steps) == ("linear", 2e-3, 210)
    ratio = (20 - WARMUP) / (210 - WARMUP)
    assert scheduler.optimizer.param_groups[0]["lr"] == pytest.approx(MIN_LR + (1 - ratio) * (2e-3 - MIN_LR))


def test_use_checkpoint_restores_the_saved_schedule_and_step() -> None:
    state = _saved_cosine_at(20)
    scheduler = _scheduler("linear", max_lr=2e-3, lr_decay_steps=210)
    scheduler.load_state_dict(state, use_checkpoint=True)
    assert scheduler.num_steps == 20
    assert (scheduler.lr_decay_style, scheduler.max_lr, scheduler.lr_decay_steps) == ("cosine", MAX_LR, DECAY)
    expected = MIN_LR + 0.5 * (math.cos(math.pi * _decay_ratio(20)) + 1.0) * (MAX_LR - MIN_LR)
    assert scheduler.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-12)


def test_override_and_use_checkpoint_are_exclusive() -> None:
    with pytest.raises(ValueError, match="mutually exclusive"):
        _scheduler("cosine").load_state_dict(_saved_cosine_at(20), override=True, use_checkpoint=True)


def test_settings_the_schedule_does_not_use_are_not_compared() -> None:
    """wd_incr_steps (from --train-iters) under constant weight decay, WSD fields under another style."""
    state = _saved_cosine_at(20)
    state.update(wd_incr_steps=999, wsd_decay_steps=7, lr_wsd_decay_style="linear")
    scheduler = _scheduler("cosine", wd_incr_steps=110)
    scheduler.load_state_dict(state)
    assert scheduler.num_steps == 20
    linear_wd = _scheduler("cosine", start_wd=0.0, end_wd=0.1, wd_incr_style="linear")
    with pytest.raises(ValueError, match="wd_incr_style"):
        linear_wd.load_state_dict(state)


def test_checkpoint_without_some_settings_still_loads() -> None:
    """A state written by an older version (fewer saved settings) resumes at its step."""
    state = {key: value for key, value in _saved_cosine_at(20).items()
             if key in ("max_lr", "min_lr", "lr_warmup_steps", "lr_decay_steps", "lr_decay_style", "num_steps")}
    for options in (dict(), dict(use_checkpoint=True), dict(override=True)):
        scheduler = _scheduler("cosine")
        scheduler.load_state_dict(state, **options)
        assert scheduler.num_steps == 20


@pytest.mark.parametrize("kwargs, match", [
    (dict(lr_decay_style="exotic"), "lr_decay_style"),
    (dict(min_lr=1.0), "min_lr"),
    (dict(lr_warmup_steps=DECAY), "lr_warmup_steps"),
    (dict(lr_decay_style="WSD", lr_wsd_decay_style="linear"), "wsd_decay_steps"),
    (dict(lr_decay_style="WSD", wsd_decay_steps=5), "lr_wsd_decay_style"),
    (dict(start_wd=0.0, end_wd=0.1), "start_wd"),
])
def test_rejects_bad_settings(kwargs: dict, match: str) -> None:
    options = dict(init_lr=0.0, max_lr=MAX_LR, min_lr=MIN_LR, lr_warmup_steps=WARMUP,
                   lr_decay_steps=DECAY, lr_decay_style="linear")
    options.update(kwargs)
    with pytest.raises(ValueError, match=match):
        OptimizerParamScheduler(_optimizer(), **options)


def test_scheduler_from_args() -> None:
    args = SimpleNamespace(lr_warmup_init=0.0, lr=1e-3, min_lr=1e-4, lr_warmup_iters=10, lr_decay_iters=110,
                           lr_decay_style="WSD", lr_wsd_decay_iters=40, lr_wsd_decay_style="linear",
                           start_weight_decay=0.01, end_weight_decay=0.01, train_iters=110,
                           weight_decay_incr_style="constant")
    scheduler = scheduler_from_args(_optimizer(), args)
    assert _lr_at(scheduler, 5) == pytest.approx(5e-4)
    assert _lr_at(scheduler, 90) == pytest.approx(1e-4 + 0.5 * 9e-4)
    assert scheduler.optimizer.param_groups[0]["weight_decay"] == pytest.approx(0.01)
