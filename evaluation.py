"""Evaluate a checkpoint on a benchmark in its published layout (MindSpeed-LLM's ``evaluation.py``).

    python evaluation.py --task mmlu --task-data-path mmlu/data/test --load ckpt/ --use-checkpoint-args \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path TOKENIZER \
        [--evaluation-batch-size 4] [--max-eval-samples 50] [--output-file results/mmlu.json]
    torchrun --nproc-per-node 2 evaluation.py ... --tensor-model-parallel-size 2   # a TP 2 checkpoint

``--task`` is one of mmlu, cmmlu, ceval, boolq, hellaswag, agieval (multiple choice, scored by the model's
log-likelihood of each choice), gsm8k, bbh (greedy generation, ``--max-new-tokens``, ``--chain-of-thought``)
and human_eval (generated code run only with ``--allow-code-execution``: a fresh interpreter without network,
with a timeout; pass@1). Prompts are wrapped in ``--prompt-type NAME``'s template (``hf``: the tokenizer's),
else in the tokenizer's chat template when it has one, unless ``--no-chat-template``. ``--max-eval-samples N`` scores the first N questions of each subject.
Prints per-subject and overall accuracy and, with ``--output-file`` (a file, or a directory that gets
``{task}.json``), writes them as JSON
(``{"task", "metric", "subjects": {name: {"total", "correct", "accuracy"}}, "overall": {...}}``).
human_eval prompts are never chat-wrapped (they are code to complete); a completion holding a fenced code
block that defines the entry point is run as that code.
Runs at any TP (PP 1, CP 1), on one CPU process too; rank 0 prints and writes.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import torch.distributed as dist

from core.checkpointing import CheckpointError
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.evaluation.errors import EvaluationError
from mindspeed_llm.evaluation.runner import evaluate


def main(argv: Optional[List[str]] = None) -> int:
    try:
        evaluate(sys.argv[1:] if argv is None else argv)
    except (EvaluationError, ArgumentError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
