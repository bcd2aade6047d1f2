"""GRPO's rewards: rule-based ones, user functions from ``module:function``, and their safe evaluation.

A reward function follows TRL's convention: ``func(prompts, completions, **columns) -> list of floats``, one
value per completion; ``columns`` are the dataset's other fields, one list entry per completion (GSM8K's
``answer``, for instance). A completion is a string or a chat (a list of ``{"role", "content"}`` messages,
whose last message's content is read).

Built-in rewards (their ``--reward-funcs`` names in ``BUILTIN_REWARDS``):

- ``gsm8k_accuracy``: 1 when the completion's number equals the reference answer's (the number after GSM8K's
  ``####``), else 0. The completion's number is the content of its last ``\\boxed{...}``, else the one after its
  last ``#### ``, else its last number; both are compared after removing commas and a trailing ``.0``
  (``1,234.0`` equals ``1234``), with the helpers of :mod:`mindspeed_llm.evaluation.answers`.
- ``format``: 1 when the completion is exactly ``<think>...</think>`` then ``<answer>...</answer>`` (whitespace
  between and around them allowed, each tag once), the DeepSeek-R1 / TRL / open-r1 template, else 0.

:func:`compute_rewards` calls every function on the batch; one that raises, returns the wrong number of values
or a non-finite value gives a one-line :class:`RewardError` naming the function and the sample (the stage skips
the step and counts it).
"""
from __future__ import annotations

import importlib
import math
import re
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from mindspeed_llm.evaluation.answers import HASHES, NUMBER, boxed_content, gsm8k_reference, \
    normalize_number

RewardFunc = Callable[..., List[float]]
Completion = Any  # a string, or a chat: a list of {"role": ..., "content": ...}

THINK_ANSWER = re.compile(r"\s*<think>((?:(?!<think>|</think>).)*)</think>\s*"
                          r"<answer>((?:(?!<answer>|</answer>).)*)</answer>\s*", re.DOTALL)


class RewardError(ValueError):
    """A reward function failed or cannot be loaded; the message is one line naming it (and the sample, whose
    index in the batch is ``sample`` when known)."""

    def __init__(self, message: str, sample: Optional[int] = None) -> None:
        super().__init__(message)
        self.sample = sample


def completion_text(completion: Completion) -> str:
    """The text of a completion: the string itself, or the content of a chat's last message."""
    if isinstance(completion, str):
        return completion
    return str(completion[-1]["content"])


def completion_answer(text: str) -> Optional[str]:
    """The completion's number (normalised): last ``\\boxed{}``, else after the last ``####``, else the last number."""
    boxed = boxed_content(text)
    if boxed is not None and normalize_number(boxed) is not None:
        return normalize_number(boxed)
    hashes = HASHES.findall(text)
    if hashes:
        return normalize_number(hashes[-1])
    numbers = NUMBER.findall(text)
    return normalize_number(numbers[-1]) if numbers else None


def gsm8k_accuracy_reward(prompts: Sequence[Completion], completions: Sequence[Completion],
                          answer: Sequence[str], **columns: Any) -> List[float]:
    """1.0 where the completion's number equals the reference after ``####`` in ``answer``, else 0.0."""
    rewards = []
    for completion, reference in zip(completions, answer):
        predicted = completion_answer(completion_text(completion))
        rewards.append(1.0 if predicted is not None and predicted == gsm8k_reference(str(reference)) else 0.0)
    return rewards


def format_reward(prompts: Sequence[Completion], completions: Sequence[Completion], **columns: Any) -> List[float]:
    """1.0 where the completion is ``<think>...</think><answer>...</answer>`` (each tag once), else 0.0."""
    return [1.0 if THINK_ANSWER.fullmatch(completion_text(c)) else 0.0 for c in completions]


BUILTIN_REWARDS: Dict[str, RewardFunc] = {"gsm8k_accuracy": gsm8k_accuracy_reward, "format": format_reward}


def load_reward_func(spec: str) -> RewardFunc:
    """A built-in reward by name, or ``module:function`` imported (the module on ``sys.path``)."""
    if spec in BUILTIN_REWARDS:
        return BUILTIN_REWARDS[spec]
    module_name, _, function_name = spec.partition(":")
    if not module_name or not function_name:
        raise RewardError(f"--reward-funcs {spec!r} is neither a built-in reward {tuple(BUILTIN_REWARDS)} "
                          f"nor module:function")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RewardError(f"--reward-funcs {spec}: cannot import module {module_name!r} ({error}); "
                          f"put it on PYTHONPATH") from error
    func = getattr(module, function_name, None)
    if not callable(func):
        raise RewardError(f"--reward-funcs {spec}: module {module_name!r} has no function {function_name!r}")
    return func


def load_reward_funcs(specs: Sequence[str] | str) -> List[RewardFunc]:
    """The reward functions of ``--reward-funcs`` (names of built-ins or ``module:function``, in order)."""
    return [load_reward_func(spec) for spec in ([specs] if isinstance(specs, str) else specs)]


def reward_name(func: RewardFunc) -> str:
    """``module:function`` of a reward function, for messages and logged columns."""
    return f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', repr(func))}"


def _failing_sample(func: RewardFunc, prompts: Sequence[Completion], completions: Sequence[Completion],
                    columns: Dict[str, Sequence[Any]]) -> Optional[int]:
    """The first sample on which ``func`` raises when called on it alone (None if none does)."""
    for index in range(len(completions)):
        try:
            func([prompts[index]], [completions[index]], **{k: [v[index]] for k, v in columns.items()})
        except Exception:  # noqa: BLE001 - any failure of user code is what we are looking for
            return index
    return None


def call_reward_func(func: RewardFunc, prompts: Sequence[Completion], completions: Sequence[Completion],
                     columns: Dict[str, Sequence[Any]]) -> List[float]:
    """``func``'s rewards of the batch, checked: one finite float per completion, else a RewardError."""
    name = reward_name(func)
    try:
        values = list(func(list(prompts), list(completions), **columns))
    except Exception as error:  # noqa: BLE001 - user code: report it in one line
        index = _failing_sample(func, prompts, completions, columns)
        where = f"on sample {index}" if index is not None else f"on the batch of {len(completions)} samples"
        first_line = (str(error).splitlines() or [""])[0]
        raise RewardError(f"reward function {name} raised {type(error).__name__} {where}: {first_line}",
                          index) from error
    if len(values) != len(completions):
        raise RewardError(f"reward function {name} returned {len(values)} values for {len(completions)} samples")
    for index, value in enumerate(values):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise RewardError(f"reward function {name} returned {value!r} on sample {index}; "
                              f"a reward must be a finite number", index)
    return [float(value) for value in values]


def compute_rewards(funcs: Sequence[RewardFunc], prompts: Sequence[Completion], completions: Sequence[Completion],
                    columns: Optional[Dict[str, Sequence[Any]]] = None,
                    weights: Optional[Sequence[float]] = None) -> torch.Tensor:
    """Rewards ``[n, len(funcs)]`` (float64) of ``n`` completions, one column per function, each
    multiplied by its weight (1 by default); the total reward of a sample is the row's sum."""
    columns = columns or {}
    for key, values in columns.items():
        if len(values) != len(completions):
            raise RewardError(f"reward column {key!r} has {len(values)} values for {len(completions)} completions")
    weights = [1.0] * len(funcs) if weights is None else list(weights)
    if len(weights) != len(funcs):
        raise RewardError(f"--reward-weights has {len(weights)} values for {len(funcs)} --reward-funcs")
    per_func = [[w * r for r in call_reward_func(f, prompts, completions, columns)] for f, w in zip(funcs, weights)]
    return torch.tensor(per_func, dtype=torch.float64).reshape(len(funcs), len(completions)).T.contiguous()
