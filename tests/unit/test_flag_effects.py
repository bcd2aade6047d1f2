"""Training flags act: a changed value changes a number the run produces, or the flag is refused.

The static flag-coverage scan (tests/unit/test_flag_coverage.py) counts a flag as used when its attribute is
read outside validation; a value copied into a config field that nothing else reads passes it. Here a curated
list of the loss, optimizer, schedule and initialisation flags runs a tiny model for three steps in process
(``training.setup`` + ``train_step``), once at a baseline and once with the flag changed, and compares what
the run produces: each step's loss, grad norm and learning rate. Each flag is changed inside a context where
it acts (e.g. ``--sgd-momentum`` under ``--optimizer sgd``); outside such a context it must be refused.

    python -m pytest -q tests/unit/test_flag_effects.py
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Tuple

import pytest

from mindspeed_llm.arguments import ArgumentError, build_parser, parse_args, validate_args

STEPS = 3
BASE = ("--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
        "--seq-length", "8", "--max-position-embeddings", "8", "--micro-batch-size", "2", "--global-batch-size",
        "2", "--train-iters", "4", "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "64", "--device", "cpu", "--eval-iters", "0", "--seed", "7", "--hidden-dropout", "0",
        "--attention-dropout", "0", "--position-embedding-type", "rope", "--normalization", "RMSNorm",
        "--swiglu", "--disable-bias-linear")
# the contexts a flag acts in: extra flags on top of BASE
CONTEXTS: Dict[str, Tuple[str, ...]] = {
    "dense": (),
    "mtp": ("--mtp-num-layers", "1", "--untie-embeddings-and-output-weights"),
    "moe": ("--num-experts", "4", "--moe-router-topk", "2", "--moe-aux-loss-coeff", "0.01"),
    "sgd": ("--optimizer", "sgd"),
    "warmup": ("--lr-warmup-iters", "2"),
    "weight decay schedule": ("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.0",
                              "--end-weight-decay", "0.5"),
}
# (context, the flag and its changed value): loss flags first, then the optimizer, the schedule, the model
EFFECTS: List[Tuple[str, Tuple[str, ...]]] = [
    ("dense", ("--label-smoothing-factor", "0.2")),
    ("mtp", ("--mtp-loss-scaling-factor", "0.6")),
    ("moe", ("--moe-aux-loss-coeff", "0.5")),
    ("moe", ("--moe-z-loss-coeff", "0.5")),
    ("moe", ("--moe-router-load-balancing-type", "seq_aux_loss")),
    ("dense", ("--lr", "3e-2")),
    ("dense", ("--clip-grad", "0.05")),
    ("dense", ("--weight-decay", "1.0")),
    ("dense", ("--adam-beta1", "0.5")),
    ("dense", ("--adam-beta2", "0.9")),
    ("dense", ("--adam-eps", "1e-2")),
    ("dense", ("--optimizer", "sgd")),
    ("sgd", ("--sgd-momentum", "0.0")),
    ("weight decay schedule", ("--start-weight-decay", "0.3")),
    ("weight decay schedule", ("--end-weight-decay", "2.0")),
    ("dense", ("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.0", "--end-weight-decay", "1.0")),
    ("dense", ("--min-lr", "5e-3")),
    ("dense", ("--lr-decay-style", "cosine")),
    ("dense", ("--lr-decay-iters", "2")),
    ("dense", ("--lr-warmup-iters", "2")),
    ("dense", ("--lr-warmup-fraction", "0.5")),
    ("warmup", ("--lr-warmup-init", "5e-3")),
    ("dense", ("--init-method-std", "0.05")),
    ("dense", ("--seed", "8")),
    ("dense", ("--hidden-dropout", "0.2")),
    ("dense", ("--attention-dropout", "0.2")),
    ("dense", ("--norm-epsilon", "0.5")),
    ("dense", ("--global-batch-size", "4")),
]
# flags that have no effect outside a context: refused there, in one line naming what they need
REFUSED_OUTSIDE: List[Tuple[Tuple[str, ...], str]] = [
    (("--mtp-loss-scaling-factor", "0.3"), "--mtp-num-layers"),
    (("--moe-aux-loss-coeff", "0.1"), "--num-experts"),
    (("--moe-z-loss-coeff", "0.1"), "--num-experts"),
    (("--sgd-momentum", "0.5"), "--optimizer sgd"),  # under --optimizer adam
    (("--adam-beta1", "0.5", "--optimizer", "sgd"), "--optimizer adam"),
    (("--adam-eps", "1e-3", "--optimizer", "sgd"), "--optimizer adam"),
    (("--lr-warmup-init", "5e-3"), "a warmup"),  # without warmup
    (("--min-lr", "5e-3", "--lr-decay-style", "constant"), "a decaying --lr-decay-style"),
    (("--start-weight-decay", "0.3"), "--weight-decay-incr-style linear or cosine"),  # under constant
    (("--loss-scale", "8"), "--fp16"),  # under fp32
    (("--initial-loss-scale", "1024", "--bf16"), "--fp16"),
    (("--loss-scale-window", "8", "--fp16", "--loss-scale", "8"), "without a static --loss-scale"),
]

Numbers = Tuple[Tuple[float, float, float], ...]


@lru_cache(maxsize=None)
def run_numbers(argv: Tuple[str, ...]) -> Numbers:
    """(loss, grad norm, learning rate) of each of the first STEPS steps of a run with ``argv``."""
    from mindspeed_llm.training.training import setup

    trainer = setup(list(argv))
    iterator = trainer.train_iterator()
    numbers = []
    for _ in range(STEPS):
        result = trainer.train_step(iterator)
        numbers.append((result.loss, float(result.grad_norm or 0.0), float(trainer.scheduler.get_lr())))
    return tuple(numbers)


def _differ(a: Numbers, b: Numbers) -> bool:
    return any(abs(x - y) > 1e-6 * max(1.0, abs(x)) for step_a, step_b in zip(a, b) for x, y in zip(step_a, step_b))


@pytest.mark.parametrize("context, change", EFFECTS, ids=[f"{c}:{' '.join(f)}" for c, f in EFFECTS])
def test_a_changed_flag_changes_the_run(context: str, change: Tuple[str, ...]) -> None:
    baseline = BASE + CONTEXTS[context]
    assert _differ(run_numbers(baseline), run_numbers(baseline + change)), (
        f"{' '.join(change)} changed no loss, grad norm or learning rate of {STEPS} steps ({context})")


def test_the_comparison_sees_no_change_at_the_default() -> None:
    """The self-check: a flag given at its default value gives the very same numbers (so ``_differ`` can fail)."""
    assert not _differ(run_numbers(BASE), run_numbers(BASE + ("--adam-beta1", "0.9", "--clip-grad", "1.0")))


def test_the_listed_flags_exist() -> None:
    """Every flag above is a flag of the training parser (a rename shows here, not as a skipped case)."""
    known = {option for action in build_parser()._actions for option in action.option_strings}
    listed = {arg for _, change in EFFECTS for arg in change if arg.startswith("--")}
    listed |= {arg for change, _ in REFUSED_OUTSIDE for arg in change if arg.startswith("--")}
    listed |= {arg for context in CONTEXTS.values() for arg in context if arg.startswith("--")}
    assert listed - known == set()


@pytest.mark.parametrize("change, needed", REFUSED_OUTSIDE, ids=[c[0] for c, _ in REFUSED_OUTSIDE])
def test_a_flag_without_effect_is_refused(change: Tuple[str, ...], needed: str) -> None:
    with pytest.raises(ArgumentError, match=needed):
        validate_args(parse_args(list(BASE + change)), 1)

