"""Post-training stages behind ``posttrain.py --stage``: each a training task (``training/task.py``)."""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Type

from mindspeed_llm.arguments import ArgumentError, parse_args
from mindspeed_llm.posttrain.grpo.task import GRPOTask
from mindspeed_llm.posttrain.orm import RewardModelTask
from mindspeed_llm.posttrain.pairwise import DPOTask, SimPOTask
from mindspeed_llm.posttrain.sft import SFTTask
from mindspeed_llm.training.task import TrainingTask

__all__ = ["STAGES", "DPOTask", "GRPOTask", "RewardModelTask", "SFTTask", "SimPOTask", "posttrain", "stage_task"]

STAGES: Dict[str, Type[TrainingTask]] = {"sft": SFTTask, "dpo": DPOTask, "simpo": SimPOTask, "orm": RewardModelTask,
                                         "grpo": GRPOTask}


def stage_task(argv: Optional[List[str]] = None) -> Type[TrainingTask]:
    """The task of ``--stage`` (on the command line or in ``--yaml-cfg``); exit 2 with one line otherwise."""
    try:
        stage = parse_args(argv).stage
        if stage is None:
            raise ArgumentError(f"posttrain.py needs --stage {'|'.join(STAGES)}")
    except ArgumentError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    return STAGES[stage]


def posttrain(argv: Optional[List[str]] = None):
    """``posttrain.py``: the stage's task through the one trainer."""
    from mindspeed_llm.training.training import run

    return run(argv, stage_task(argv))
