"""The checks of evaluation.py's own flags (``mindspeed_llm/entry_flags.py`` declares them)."""
from __future__ import annotations

import argparse

from mindspeed_llm.flags import ArgumentError


def check_evaluation_flags(args: argparse.Namespace) -> None:
    """evaluation.py's counts in range (the task itself is checked where the benchmark is read)."""
    if args.evaluation_batch_size < 1:
        raise ArgumentError(f"--evaluation-batch-size must be at least 1, got {args.evaluation_batch_size}")
    if args.max_eval_samples is not None and args.max_eval_samples < 1:
        raise ArgumentError(f"--max-eval-samples must be at least 1, got {args.max_eval_samples}")
