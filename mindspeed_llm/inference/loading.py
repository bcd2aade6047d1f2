"""The model of an inference run: flags -> process groups -> this rank's model with the ``--load`` weights.

The same flags, validation, process groups and checkpoint spine as training (``mindspeed_llm/arguments.py``,
``mindspeed_llm/runtime.py``), without the optimizer. The training-only
required flags get placeholders when absent (a generation run has no learning rate). Sequence parallelism
is turned off (a decode step is one token; the weights are the same). Each pipeline rank builds its stage.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from core import checkpointing
from core.models.gpt_model import GPTModel
from core.parallel_state import ParallelState
from core.tensor_parallel.random import model_parallel_seed
from mindspeed_llm.arguments import parse_and_validate, transformer_config_from_args
from mindspeed_llm.entry_flags import INFERENCE
from mindspeed_llm.inference.flags import check_generation_flags
from mindspeed_llm.runtime import WeightSource, build_chunks, load_model_weights, start_processes, tokenizer_and_vocab

# flags training requires that generation does not use: (flag, placeholder)
PLACEHOLDERS = (("--train-iters", "1"), ("--lr", "0.0"), ("--micro-batch-size", "8"))


@dataclass
class InferenceSetup:
    args: argparse.Namespace
    state: ParallelState
    model: GPTModel
    tokenizer: object


def with_placeholders(argv: Sequence[str]) -> List[str]:
    """``argv`` with the training-only required flags it lacks set to placeholders; ``--seq-length``
    defaults to the model's context."""
    given = {arg.split("=", 1)[0] for arg in argv}
    extra: List[str] = []
    for flag, value in PLACEHOLDERS:
        if flag not in given:
            extra += [flag, value]
    if "--seq-length" not in given:
        context = _context_length(list(argv))
        extra += ["--seq-length", str(context)] if context is not None else []
    return extra + list(argv)


def _context_length(argv: List[str]) -> Optional[int]:
    """``--max-position-embeddings`` as given, or with ``--use-checkpoint-args`` the ``--load`` checkpoint's."""
    if "--max-position-embeddings" in argv:
        return int(argv[argv.index("--max-position-embeddings") + 1])
    if "--use-checkpoint-args" in argv and "--load" in argv:
        try:
            saved = checkpointing.read_checkpoint_settings(argv[argv.index("--load") + 1])[2]
        except checkpointing.CheckpointError:
            return None  # parsing reports the missing checkpoint
        return saved.get("max_position_embeddings")
    return None


def load_weights(model: GPTModel, args: argparse.Namespace, state: ParallelState) -> str:
    """Load this rank's part of the ``--load`` checkpoint into ``model``; its path."""
    source = WeightSource(args.load, missing=f"--load {args.load} has no {checkpointing.TRACKER_FILENAME}; pass a "
                                             "checkpoint directory (tools/convert_ckpt.py writes one from HF)",
                          hint="; check the model flags against the checkpoint's or pass --use-checkpoint-args")
    return load_model_weights([model], source, args, state).path


def validated_generation_args(argv: Optional[Sequence[str]], entry: str = INFERENCE,
                              world_size: Optional[int] = None) -> argparse.Namespace:
    """``entry``'s flags with the training-only placeholders, through the shared validation pass (a bad flag:
    ``error: ...`` and exit 2) and the generation flags' checks (ArgumentError); ``world_size`` defaults to
    ``WORLD_SIZE``."""
    return parse_and_validate(with_placeholders(sys.argv[1:] if argv is None else argv), world_size, entry,
                              checks=(check_generation_flags,))


def setup_inference(argv: Optional[Sequence[str]], check: Callable[[argparse.Namespace], None] = lambda args: None,
                    entry: str = INFERENCE) -> InferenceSetup:
    """Parse and validate ``entry``'s flags (inference.py or evaluation.py; then ``check`` them: the entry's own
    rules), start the process groups, build the model and load ``--load``."""
    args = validated_generation_args(argv, entry)
    check(args)
    if args.context_parallel_size > 1 or args.virtual_pipeline_model_parallel_size:
        raise ValueError("inference.py runs without --context-parallel-size and virtual pipeline stages; convert "
                         "the checkpoint to a plain TP/PP layout (tools/convert_ckpt.py) or drop the flags")
    if not args.load:
        raise ValueError("inference.py needs --load DIR (a checkpoint of ours; convert HF ones with "
                         "tools/convert_ckpt.py)")
    tokenizer = tokenizer_and_vocab(args)
    config = dataclasses.replace(transformer_config_from_args(args), sequence_parallel=False)
    acc, state = start_processes(args)
    model_parallel_seed(args.seed, state.tp_rank, state.pp_rank)
    model = build_chunks(args, config, state, acc.device, virtual=False)[0]  # this stage's layers
    load_weights(model, args, state)
    model.eval()
    return InferenceSetup(args, state, model, tokenizer)
