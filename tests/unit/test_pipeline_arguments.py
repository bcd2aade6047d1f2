"""Pipeline flags are validated before any process-group work, with messages naming the flags."""
from __future__ import annotations

from typing import List

import pytest

from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

BASE = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "8", "--seq-length", "32",
        "--micro-batch-size", "1", "--train-iters", "10", "--lr", "1e-3"]


def _error(extra: List[str], world_size: int) -> str:
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + extra), world_size)
    return str(info.value)


def test_layers_must_split_over_stages_without_a_list() -> None:
    message = _error(["--pipeline-model-parallel-size", "3"], 3)
    assert "--num-layers (8)" in message and "--pipeline-model-parallel-size (3)" in message
    args = parse_args(BASE + ["--pipeline-model-parallel-size", "3", "--num-layer-list", "2,3,3"])
    validate_args(args, 3)
    assert args.num_layer_list == (2, 3, 3)


def test_layer_list_length_and_sum() -> None:
    assert "3 entries" in _error(["--pipeline-model-parallel-size", "2", "--num-layer-list", "2,3,3"], 2)
    assert "sums to 7" in _error(["--pipeline-model-parallel-size", "2", "--num-layer-list", "3,4"], 2)


def test_noop_layer_out_of_range() -> None:
    assert "--noop-layers [8]" in _error(["--pipeline-model-parallel-size", "2", "--noop-layers", "0,8"], 2)


def test_interleaving_needs_micro_batches_in_groups_of_pp() -> None:
    flags = ["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2"]
    message = _error(flags + ["--global-batch-size", "3"], 2)
    assert "multiple of --pipeline-model-parallel-size (2)" in message
    args = parse_args(BASE + flags + ["--global-batch-size", "4"])
    validate_args(args, 2)
    assert args.virtual_pipeline_model_parallel_size == 2


def test_virtual_stages_need_a_pipeline() -> None:
    assert "--pipeline-model-parallel-size of 2 or more" in _error(["--virtual-pipeline-model-parallel-size", "2"], 1)
    args = parse_args(BASE + ["--pipeline-model-parallel-size", "2", "--virtual-pipeline-model-parallel-size", "2",
                              "--global-batch-size", "2"])
    validate_args(args, 2)
    assert args.num_layers_per_virtual_pipeline_stage == 2


def test_zero_bubble_and_layer_list_combinations() -> None:
    assert "zero-bubble" in _error(["--schedules-method", "zero-bubble"], 1)
    assert "virtual" in _error(["--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2",
                                "--num-layer-list", "4,4", "--global-batch-size", "2"], 2)


HYBRID = ["--position-embedding-type", "none", "--ffn-hidden-size", "128", "--mamba-head-dim", "16",
          "--mamba-num-groups", "1"]


def test_pattern_pipes_place_the_stages() -> None:
    """Megatron-core's '|' in --hybrid-override-pattern: one segment per stage (uneven here: a --num-layer-list) or
    per virtual chunk; the letters alone are the pattern."""
    args = parse_args(BASE + HYBRID + ["--pipeline-model-parallel-size", "2", "--hybrid-override-pattern",
                                       "M-M|-M*-M"])
    validate_args(args, 2)
    assert args.hybrid_override_pattern == "M-M-M*-M" and args.num_layer_list == (3, 5)
    args = parse_args(BASE + HYBRID + ["--pipeline-model-parallel-size", "2", "--hybrid-override-pattern",
                                       "M-|M-|*-|M-", "--global-batch-size", "2"])
    validate_args(args, 2)
    assert args.hybrid_override_pattern == "M-M-*-M-" and args.virtual_pipeline_model_parallel_size == 2
    assert args.num_layers_per_virtual_pipeline_stage == 2


def test_pattern_pipes_and_mtp_refused_when_they_cannot_place() -> None:
    assert "one per pipeline stage" in _error(HYBRID + ["--pipeline-model-parallel-size", "2",
                                                        "--hybrid-override-pattern", "M-M|-M*|-M"], 2)
    assert "MTP" in _error(HYBRID + ["--pipeline-model-parallel-size", "2", "--hybrid-override-pattern",
                                     "M-M-M*-M/M-"], 2)
    assert "differs from the stages" in _error(HYBRID + ["--pipeline-model-parallel-size", "2",
                                                         "--hybrid-override-pattern", "M-M|-M*-M",
                                                         "--num-layer-list", "4,4"], 2)
    assert "different sizes" in _error(HYBRID + ["--pipeline-model-parallel-size", "2", "--hybrid-override-pattern",
                                                 "M-|M-|*-M|-M", "--global-batch-size", "2"], 2)
