"""Learning-rate and weight-decay schedules, with Megatron-LM's semantics.

    scheduler = OptimizerParamScheduler(optimizer, init_lr=0.0, max_lr=3e-4, min_lr=3e-5,
                                        lr_warmup_steps=100, lr_decay_steps=10000,
                                        lr_decay_style="cosine")
    for iteration in ...:
        optimizer.step()
        scheduler.step()            # one step per iteration

Learning rate at step ``n`` (``w`` warmup steps, ``D`` decay steps):

* ``n <= w`` (and ``w > 0``): linear warmup ``init_lr + (max_lr - init_lr) * n / w``;
* ``constant``: ``max_lr`` after warmup;
* ``n > D``: ``min_lr``;
* ``inverse-square-root``: ``max(min_lr, max_lr * sqrt(max(w, 1)) / sqrt(max(n, 1)))``;
* otherwise, with ``r = (n - w) / (D - w)``, ``lr = min_lr + c * (max_lr - min_lr)`` where
  ``c = 1 - r`` (``linear``), ``0.5 * (cos(pi r) + 1)`` (``cosine``), or for ``WSD``
  ``c = 1`` until ``D - wsd_decay_steps`` and then, with ``q`` the fraction of the
  final ``wsd_decay_steps`` done, ``1 - q`` (linear), ``0.5 (cos(pi q) + 1)`` (cosine),
  ``2 * 0.5**q - 1`` (exponential) or ``1 - sqrt(q)`` (minus_sqrt).

Weight decay goes from ``start_wd`` to ``end_wd`` over ``wd_incr_steps``
(``constant``, ``linear`` or ``cosine``). Each parameter group gets
``lr * group.get('lr_mult', 1)`` and ``wd * group.get('wd_mult', 1)``; a group may
also carry its own ``max_lr`` / ``min_lr``. Groups that must not decay (biases,
norms) carry ``wd_mult=0``.

Resuming (Megatron's ``--override-opt-param-scheduler`` and
``--use-checkpoint-opt_param-scheduler``): the step count always comes from the
checkpoint. The schedule's settings must equal the checkpoint's (settings that do
not change the schedule, such as WSD fields under another decay style, are not
compared), unless ``override=True`` keeps the flags' schedule or
``use_checkpoint=True`` takes the checkpoint's; the two are mutually exclusive.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

import torch

LR_DECAY_STYLES = ("constant", "linear", "cosine", "inverse-square-root", "WSD")
WSD_DECAY_STYLES = ("linear", "cosine", "exponential", "minus_sqrt")
WD_INCR_STYLES = ("constant", "linear", "cosine")

# Hyperparameters saved with the step count; a resume restores them unless overridden.
_STATE_KEYS = ("init_lr", "max_lr", "min_lr", "lr_warmup_steps", "lr_decay_steps", "lr_decay_style",
               "wsd_decay_steps", "lr_wsd_decay_style", "start_wd", "end_wd", "wd_incr_steps",
               "wd_incr_style")

# The flag that sets each saved setting, for error messages.
_SETTING_FLAGS = {
    "init_lr": "--lr-warmup-init", "max_lr": "--lr", "min_lr": "--min-lr",
    "lr_warmup_steps": "--lr-warmup-iters/--lr-warmup-fraction",
    "lr_decay_steps": "--lr-decay-iters, default --train-iters",
    "lr_decay_style": "--lr-decay-style", "wsd_decay_steps": "--lr-wsd-decay-iters",
    "lr_wsd_decay_style": "--lr-wsd-decay-style", "start_wd": "--start-weight-decay",
    "end_wd": "--end-weight-decay", "wd_incr_steps": "--train-iters", "wd_incr_style": "--weight-decay-incr-style",
}
_WSD_KEYS = ("wsd_decay_steps", "lr_wsd_decay_style")


def _decay_coefficient(style: str, ratio: float) -> float:
    """Fraction of (max_lr - min_lr) left after ``ratio`` of a decay of the given style."""
    if style == "linear":
        return 1.0 - ratio
    if style == "cosine":
        return 0.5 * (math.cos(math.pi * ratio) + 1.0)
    if style == "exponential":
        return 2.0 * math.pow(0.5, ratio) - 1.0
    if style == "minus_sqrt":
        return 1.0 - math.sqrt(ratio)
    raise ValueError(f"unknown decay style {style!r}")


class OptimizerParamScheduler:
    """Sets ``lr`` and ``weight_decay`` of every parameter group of an optimizer at each step."""

    def __init__(self, optimizer: torch.optim.Optimizer, init_lr: float, max_lr: float, min_lr: float,
                 lr_warmup_steps: int, lr_decay_steps: int, lr_decay_style: str,
                 wsd_decay_steps: Optional[int] = None, lr_wsd_decay_style: Optional[str] = None,
                 start_wd: float = 0.0, end_wd: Optional[float] = None,
                 wd_incr_steps: Optional[int] = None, wd_incr_style: str = "constant") -> None:
        self.optimizer = optimizer
        self.init_lr = float(init_lr)
        self.max_lr = float(max_lr)
        self.min_lr = float(min_lr)
        self.lr_warmup_steps = lr_warmup_steps
        self.lr_decay_steps = lr_decay_steps
        self.lr_decay_style = lr_decay_style
        self.wsd_decay_steps = wsd_decay_steps
        self.lr_wsd_decay_style = lr_wsd_decay_style
        self.start_wd = float(start_wd)
        self.end_wd = float(start_wd if end_wd is None else end_wd)
        self.wd_incr_steps = lr_decay_steps if wd_incr_steps is None else wd_incr_steps
        self.wd_incr_style = wd_incr_style
        self.num_steps = 0
        self._check()
        self.step(0)

    def _check(self) -> None:
        if self.lr_decay_style not in LR_DECAY_STYLES:
            raise ValueError(f"lr_decay_style {self.lr_decay_style!r} is not one of {LR_DECAY_STYLES}")
        if not 0.0 <= self.min_lr <= self.max_lr:
            raise ValueError(f"need 0 <= min_lr ({self.min_lr}) <= max_lr ({self.max_lr})")
        if self.lr_decay_steps <= 0:
            raise ValueError(f"lr_decay_steps must be positive, got {self.lr_decay_steps}")
        if not 0 <= self.lr_warmup_steps < self.lr_decay_steps:
            raise ValueError(f"lr_warmup_steps ({self.lr_warmup_steps}) must be in "
                             f"[0, lr_decay_steps ({self.lr_decay_steps}))")
        if self.lr_decay_style == "WSD":
            if self.lr_wsd_decay_style not in WSD_DECAY_STYLES:
                raise ValueError(f"lr_wsd_decay_style {self.lr_wsd_decay_style!r} is not one of "
                                 f"{WSD_DECAY_STYLES}")
            if self.wsd_decay_steps is None or self.wsd_decay_steps <= 0:
                raise ValueError("the WSD decay style needs a positive wsd_decay_steps")
        if self.wd_incr_style not in WD_INCR_STYLES:
            raise ValueError(f"wd_incr_style {self.wd_incr_style!r} is not one of {WD_INCR_STYLES}")
        if self.wd_incr_style == "constant" and self.start_wd != self.end_wd:
            raise ValueError(f"constant weight decay needs start_wd ({self.start_wd}) == "
                             f"end_wd ({self.end_wd})")
        if self.wd_incr_style != "constant" and self.wd_incr_steps <= 0:
            raise ValueError(f"wd_incr_steps must be positive, got {self.wd_incr_steps}")

    # ------------------------------------------------------------------ schedules

    def get_wd(self) -> float:
        """Weight decay at the current step."""
        if self.wd_incr_style == "constant" or self.num_steps > self.wd_incr_steps:
            return self.end_wd
        ratio = self.num_steps / self.wd_incr_steps
        if self.wd_incr_style == "linear":
            coeff = ratio
        else:  # cosine: slow start, slow finish
            coeff = 0.5 * (math.cos(math.pi * (1.0 - ratio)) + 1.0)
        return self.start_wd + coeff * (self.end_wd - self.start_wd)

    def get_lr(self, param_group: Optional[Dict[str, Any]] = None) -> float:
        """Learning rate at the current step, before any ``lr_mult``.

        ``param_group`` may override ``max_lr`` and ``min_lr``.
        """
        group = param_group or {}
        max_lr = float(group.get("max_lr", self.max_lr))
        min_lr = float(group.get("min_lr", self.min_lr))
        n, warmup, decay = self.num_steps, self.lr_warmup_steps, self.lr_decay_steps
        if warmup > 0 and n <= warmup:
            return self.init_lr + (max_lr - self.init_lr) * n / warmup
        if self.lr_decay_style == "constant":
            return max_lr
        if n > decay:
            return min_lr
        if self.lr_decay_style == "inverse-square-root":
            return max(min_lr, max_lr * math.sqrt(max(warmup, 1)) / math.sqrt(max(n, 1)))
        ratio = (n - warmup) / (decay - warmup)
        if self.lr_decay_style == "WSD":
            coeff = self._wsd_coefficient(n)
        else:
            coeff = _decay_coefficient(self.lr_decay_style, ratio)
        return min_lr + coeff * (max_lr - min_lr)

    def _wsd_coefficient(self, n: int) -> float:
        """Warmup-stable-decay: hold max_lr, then decay over the last wsd_decay_steps."""
        anneal_start = self.lr_decay_steps - self.wsd_decay_steps
        if n <= anneal_start:
            return 1.0
        ratio = (n - anneal_start) / self.wsd_decay_steps
        return _decay_coefficient(self.lr_wsd_decay_style, ratio)

    def step(self, increment: int = 1) -> None:
        """Advance ``increment`` steps and write lr / weight_decay into every param group."""
        self.num_steps += increment
        wd = self.get_wd()
        for group in self.optimizer.param_groups:
            group["lr"] = self.get_lr(group) * group.get("lr_mult", 1.0)
            group["weight_decay"] = wd * group.get("wd_mult", 1.0)

    # ------------------------------------------------------------------ checkpointing

    def state_dict(self) -> Dict[str, Any]:
        """Plain numbers and strings: the step count and the schedule's hyperparameters."""
        state = {key: getattr(self, key) for key in _STATE_KEYS}
        state["num_steps"] = self.num_steps
        return state

    def load_state_dict(self, state: Dict[str, Any], *, override: bool = False,
                        use_checkpoint: bool = False) -> None:
        """Resume at the saved step (Megatron's semantics for the saved settings).

        By default the saved settings must equal this scheduler's (a ``ValueError``
        names the ones that differ); ``override`` keeps this scheduler's settings and
        ``use_checkpoint`` takes the checkpoint's. The step count is restored in every case.
        """
        if override and use_checkpoint:
            raise ValueError("--override-opt-param-scheduler and --use-checkpoint-opt_param-scheduler are "
                             "mutually exclusive; pass one of them")
        if use_checkpoint:
            for key in _STATE_KEYS:
                if key in state:  # checkpoints of older versions may lack a setting: keep the flags'
                    setattr(self, key, state[key])
            self._check()
        elif not override:
            self._check_matches(state)
        self.num_steps = 0
        self.step(int(state["num_steps"]))

    def _check_matches(self, state: Dict[str, Any]) -> None:
        """Raise, naming every setting whose saved value differs from this scheduler's."""
        differing = [f"{key} ({_SETTING_FLAGS[key]}) is {state[key]!r} in the checkpoint and "
                     f"{getattr(self, key)!r} from the flags"
                     for key in _STATE_KEYS if key in state and self._affects_schedule(key, state)
                     and state[key] != getattr(self, key)]
        if differing:
            raise ValueError(
                f"the checkpoint's learning-rate schedule differs from the flags: {'; '.join(differing)}; pass "
                "--override-opt-param-scheduler to use the flags' schedule or --use-checkpoint-opt_param-scheduler "
                "to use the checkpoint's")

    def _affects_schedule(self, key: str, state: Dict[str, Any]) -> bool:
        """False for settings that neither the saved nor this schedule uses."""
        if key in _WSD_KEYS:
            return "WSD" in (self.lr_decay_style, state.get("lr_decay_style"))
        if key == "wd_incr_steps":
            return not self.wd_incr_style == state.get("wd_incr_style", self.wd_incr_style) == "constant"
        return True


def scheduler_from_args(optimizer: torch.optim.Optimizer, args: Any) -> OptimizerParamScheduler:
    """The scheduler for parsed training flags (``mindspeed_llm.arguments``); one step per iteration."""
    style = args.lr_decay_style
    return OptimizerParamScheduler(
        optimizer,
        init_lr=args.lr_warmup_init,
        max_lr=args.lr,
        min_lr=args.min_lr,
        lr_warmup_steps=args.lr_warmup_iters,
        lr_decay_steps=args.lr_decay_iters,
        lr_decay_style=style,
        wsd_decay_steps=args.lr_wsd_decay_iters if style == "WSD" else None,
        lr_wsd_decay_style=args.lr_wsd_decay_style if style == "WSD" else None,
        start_wd=args.start_weight_decay,
        end_wd=args.end_weight_decay,
        wd_incr_steps=args.train_iters,
        wd_incr_style=args.weight_decay_incr_style,
    )
