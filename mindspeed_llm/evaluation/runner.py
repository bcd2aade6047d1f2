"""The evaluation run: flags -> questions -> the trainer's model loaded from ``--load`` -> judged -> report.

The model comes from inference.py's loader (``mindspeed_llm/inference/loading.py``: the trainer's flags,
checks, process groups and ``--load`` with ``--use-checkpoint-args``, no optimizer; the training-only required
flags get placeholders). :func:`read_benchmark` checks the benchmark's flags and reads its questions before
the model is built, so a missing file costs nothing. Every TP rank runs the same forward passes; rank 0
prints and writes. Pipeline and context parallelism are refused (one forward is one call here).
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import torch

from core.parallel_state import ParallelState
from mindspeed_llm.entry_flags import EVALUATION, EVALUATION_TASKS
from mindspeed_llm.evaluation.flags import check_evaluation_flags
from mindspeed_llm.data.templates import ChatEncoder
from mindspeed_llm.evaluation.errors import EvaluationError
from mindspeed_llm.evaluation.results import accuracy_report, format_report, write_report
from mindspeed_llm.evaluation.scoring import Generator, GreedyGenerator, ModelForward, ModelScorer, Scorer
from mindspeed_llm.evaluation.tasks import BUILDERS, ChoiceQuestion, EvalOptions, OpenQuestion, Question
from mindspeed_llm.inference.loading import setup_inference
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.runtime import print_rank_0


# a benchmark flag -> the tasks that read it (given with another task it would be ignored: refused instead)
TASK_FLAGS = {"chain_of_thought": ("gsm8k", "bbh"), "allow_code_execution": ("human_eval",),
              "eval_language": ("mmlu", "cmmlu", "ceval")}


def options_from_args(args: argparse.Namespace) -> EvalOptions:
    return EvalOptions(chain_of_thought=args.chain_of_thought, max_eval_samples=args.max_eval_samples or 0,
                       allow_code_execution=args.allow_code_execution, language=args.eval_language)


def check_task_flags(args: argparse.Namespace) -> None:
    """A benchmark flag given with a task that does not read it is refused in one line."""
    for dest, tasks in TASK_FLAGS.items():
        if getattr(args, dest) and args.task not in tasks:
            raise EvaluationError(f"--{dest.replace('_', '-')} applies to --task {'|'.join(tasks)}, not "
                                  f"--task {args.task}: drop it")


def read_benchmark(args: argparse.Namespace) -> List[Question]:
    """The questions of ``--task`` read from ``--task-data-path``, after the benchmark's flags are checked."""
    check_evaluation_flags(args)
    if args.task is None:
        raise EvaluationError(f"evaluation.py needs --task, one of {', '.join(EVALUATION_TASKS)}")
    if args.task not in EVALUATION_TASKS:
        raise EvaluationError(f"--task {args.task} is not a benchmark evaluation.py knows: "
                              f"{', '.join(EVALUATION_TASKS)}")
    if not args.task_data_path:
        raise EvaluationError(f"--task {args.task} needs --task-data-path DIR (the benchmark in its published "
                              "layout)")
    if args.pipeline_model_parallel_size > 1 or args.context_parallel_size > 1:
        raise EvaluationError("evaluation.py runs at --pipeline-model-parallel-size 1 and "
                              "--context-parallel-size 1; convert the checkpoint to PP 1 (tools/convert_ckpt.py)")
    if not args.load:
        raise EvaluationError("evaluation.py needs --load DIR (a checkpoint of ours; tools/convert_ckpt.py "
                              "converts Hugging Face ones) and --use-checkpoint-args")
    if args.tokenizer_type in (None, "NullTokenizer"):
        raise EvaluationError("evaluation.py reads text: give --tokenizer-type PretrainedFromHF "
                              "--tokenizer-name-or-path DIR (or another text tokenizer)")
    check_task_flags(args)
    questions = BUILDERS[args.task](args.task_data_path, options_from_args(args))
    if not questions:
        raise EvaluationError(f"{args.task}: --task-data-path {' '.join(args.task_data_path)} holds no questions")
    return questions


def judge(questions: Sequence[Question], scorer: Optional[Scorer], generator: Optional[Generator],
          max_new_tokens: int, plain_generator: Optional[Generator] = None,
          strip_continuations: bool = False) -> List[Tuple[str, bool]]:
    """``(subject, correct)`` per question, in order: choices by log-likelihood, open questions by generation.

    ``plain_generator`` answers the questions that must not be wrapped in a chat template (code to complete;
    default ``generator``); ``strip_continuations`` drops the space before a choice (after a template's
    assistant header the answer starts the turn)."""
    choice = [q for q in questions if isinstance(q, ChoiceQuestion)]
    open_ = [q for q in questions if isinstance(q, OpenQuestion)]
    verdicts = {}
    if choice:
        requests = [(q.context, c.lstrip() if strip_continuations else c) for q in choice for c in q.choices]
        scores = iter(scorer.loglikelihoods(requests))
        for q in choice:
            values = [next(scores) / (len(c) if q.per_character else 1) for c in q.choices]
            verdicts[id(q)] = max(range(len(values)), key=values.__getitem__) == q.answer
    for stop in sorted({tuple(q.stop) for q in open_}):  # one generate call per stop set (a task has one)
        for plain in (False, True):
            group = [q for q in open_ if tuple(q.stop) == stop and q.plain == plain]
            answerer = plain_generator if plain and plain_generator is not None else generator
            texts = answerer.generate([q.prompt for q in group], max_new_tokens, stop) if group else []
            for q, text in zip(group, texts):
                verdicts[id(q)] = q.judge(text)
    return [(q.subject, verdicts[id(q)]) for q in questions]


def prompt_encoder(args: argparse.Namespace, tokenizer) -> Optional[ChatEncoder]:
    """The template prompts are wrapped in: ``--prompt-type NAME`` (``hf``: the tokenizer's own), else the
    tokenizer's chat template when it has one and ``--no-chat-template`` is not given; None: plain text."""
    name = args.prompt_type
    if name is None and not args.no_chat_template and getattr(tokenizer, "has_chat_template", False):
        name = "hf"
    if name is None:
        return None
    try:
        return ChatEncoder(tokenizer, name)
    except ValueError as error:
        raise EvaluationError(str(error)) from None


def _encoders(tokenizer, template: Optional[ChatEncoder]) -> Tuple[Callable[[str], List[int]],
                                                                   Callable[[str], List[int]]]:
    """(a prompt in ``template``, a plain prompt): BOS first when the tokenizer adds one and no template does."""
    bos = [tokenizer.bos] if getattr(tokenizer, "add_bos", False) and tokenizer.bos is not None else []

    def plain(text: str) -> List[int]:
        return bos + tokenizer.tokenize(text)

    if template is None:
        return plain, plain
    return (lambda text: template.encode_prompt(None, [], text)), plain


def _special_id(tokenizer, name: str) -> Optional[int]:
    try:
        return int(getattr(tokenizer, name))
    except (ValueError, AttributeError, TypeError):
        return None


@dataclass
class ModelJudges:
    """What questions are put to: the scorer and generators, and whether prompts are in a chat template."""
    scorer: Scorer
    generator: Generator
    plain_generator: Generator  # for prompts never wrapped (code to complete)
    templated: bool


def model_judges(args: argparse.Namespace, model: torch.nn.Module, state: ParallelState,
                 device: torch.device) -> ModelJudges:
    """The scorer and greedy generators over ``model`` with ``args``' tokenizer and prompt template."""
    tokenizer = build_tokenizer(args)
    template = prompt_encoder(args, tokenizer)
    encode, encode_plain = _encoders(tokenizer, template)
    pad = _special_id(tokenizer, "pad")
    forward = ModelForward(model, state, args.vocab_size, args.max_position_embeddings,
                           pad if pad is not None else 0, device, state.tp if args.sequence_parallel else 1)
    eos = _special_id(tokenizer, "eod")
    batch = args.evaluation_batch_size
    return ModelJudges(ModelScorer(forward, encode, tokenizer.tokenize, batch),
                       GreedyGenerator(forward, encode, tokenizer.detokenize, eos, batch),
                       GreedyGenerator(forward, encode_plain, tokenizer.detokenize, eos, batch),
                       template is not None)


def evaluate(argv: Sequence[str]) -> dict:
    """Run the benchmark of ``argv`` (evaluation.py's flags); the report (rank 0 prints it and writes
    ``--output-file``)."""
    questions: List[Question] = []  # read before the model is built: a bad path fails fast
    loaded = setup_inference(argv, check=lambda args: questions.extend(read_benchmark(args)), entry=EVALUATION)
    args, state = loaded.args, loaded.state
    judges = model_judges(args, loaded.model, state, next(loaded.model.parameters()).device)
    subjects = len({q.subject for q in questions})
    print_rank_0(f"evaluating {args.task}: {len(questions)} questions in {subjects} subjects")
    judged = judge(questions, judges.scorer, judges.generator, args.max_new_tokens, judges.plain_generator,
                   strip_continuations=judges.templated)
    report = accuracy_report(args.task, judged)
    print_rank_0(format_report(report))
    print_rank_0("evaluation results: " + json.dumps(report["overall"]))
    if args.output_file and state.rank == 0:
        path = report_path(args.output_file, args.task)
        write_report(report, path)
        print_rank_0(f"wrote {path}")
    return report


def report_path(output: str, task: str) -> str:
    """``--output-file``: the file itself, or ``{task}.json`` in it when it is a directory (or ends with /)."""
    if os.path.isdir(output) or output.endswith(os.sep):
        return os.path.join(output, f"{task}.json")
    return output
