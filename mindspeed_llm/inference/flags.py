"""The checks of the generation flags (``mindspeed_llm/entry_flags.py`` declares them), beside the sampler.

``inference.py`` and ``evaluation.py`` run :func:`check_generation_flags` after the shared validation pass;
the sampling knobs' ranges are :class:`SamplingConfig`'s own.
"""
from __future__ import annotations

import argparse

from mindspeed_llm.entry_flags import EVALUATION_TASKS, INFERENCE_TASKS
from mindspeed_llm.flags import ArgumentError
from mindspeed_llm.inference.sampling import SamplingConfig


def check_generation_flags(args: argparse.Namespace) -> None:
    """The task, the sampling knobs and the counts in range (one line each)."""
    if args.task is not None and args.task not in INFERENCE_TASKS + EVALUATION_TASKS:
        raise ArgumentError(f"--task {args.task} is not one of {', '.join(INFERENCE_TASKS + EVALUATION_TASKS)}")
    try:  # the sampling knobs' ranges, checked where the sampler defines them
        SamplingConfig(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                       repetition_penalty=args.repetition_penalty)
    except ValueError as error:
        raise ArgumentError(str(error)) from None
    for flag, value in (("--max-new-tokens", args.max_new_tokens), ("--num-beams", args.num_beams)):
        if value < 1:
            raise ArgumentError(f"{flag} must be at least 1, got {value}")
    if args.history_turns < 0:
        raise ArgumentError(f"--history-turns must be 0 or more, got {args.history_turns}")
