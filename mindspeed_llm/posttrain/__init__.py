"""Post-training stages behind ``posttrain.py --stage``: each a training task (``training/task.py``)."""
from __future__ import annotations

import sys
from typing import Dict, List, Optional, Type

from mindspeed_llm.arguments import ArgumentError, load_yaml_defaults
from mindspeed_llm.flags import FlagParser
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
        stage = requested_stage(list(sys.argv[1:] if argv is None else argv))
        if stage is None:
            raise ArgumentError(f"posttrain.py needs --stage {'|'.join(STAGES)}")
    except ArgumentError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    return STAGES[stage]


def requested_stage(argv: List[str]) -> Optional[str]:
    """``--stage`` from the command line, else from the ``--yaml-cfg`` file (its other flags are left to the
    stage's own parser); an unknown stage is argparse's "invalid choice" line."""
    wanted = FlagParser(add_help=False)
    wanted.add_argument("--stage", choices=tuple(STAGES), default=None)
    wanted.add_argument("--yaml-cfg", type=str, default=None)
    known, _ = wanted.parse_known_args(argv)
    if known.stage is None and known.yaml_cfg:
        return load_yaml_defaults(known.yaml_cfg, wanted, only=("stage",)).get("stage")
    return known.stage


def posttrain(argv: Optional[List[str]] = None):
    """``posttrain.py``: the stage's task through the one trainer."""
    from mindspeed_llm.training.training import run

    return run(argv, stage_task(argv))
