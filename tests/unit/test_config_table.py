"""The config table (``core/transformer/config.py``) is the one place a model-config field is written.

Each field's flag, group, help and features come from its ``config_field(...)``;
the parser, the args -> config step, ``--use-checkpoint-args``, the settings a
checkpoint is compared on and the YAML keys are generated from it. The planted
field test proves "adding a field is one line": a child process adds one line to
``ModelConfig`` (the source is compiled with the line inserted; nothing else
changes) and finds the field in the parser, in a YAML file, in the built config,
in a saved checkpoint's stored settings, in a ``--use-checkpoint-args`` load and
in the saved-settings check of a load that contradicts it.

    python -m pytest tests/unit/test_config_table.py -q
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from core.transformer.config import RUNTIME_CONFIG_FIELDS, architecture_settings
from core.transformer.config import (ACTIVATIONS, ATTENTION, MAMBA, MOE, ModelConfig, RuntimeConfig, TransformerConfig,
                                     activation_switches, architecture_fields, feature_fields, field_spec,
                                     runtime_fields)
from mindspeed_llm.arguments import (CONFIG_DERIVATIONS, ArgumentError, build_parser, config_flag_dest, parse_args,
                                     table_flag_fields, transformer_config_from_args, validate_args)

REPO = Path(__file__).resolve().parents[2]
CONFIG_SOURCE = REPO / "core" / "transformer" / "config.py"
PLANTED = '    planted_width: int = config_field(7, help="a field planted by tests/unit/test_config_table.py")'
END_OF_MODEL_CONFIG = "\n\n\n@dataclass\nclass RuntimeConfig"

# The child: compile config.py with the planted line, then use the suite as a user would. Prints one JSON line.
CHILD = r'''
import json, os, sys, types
path, planted, anchor, out = sys.argv[1:5]
source = open(path, encoding="utf-8").read()
at = source.index(anchor)
module = types.ModuleType("core.transformer.config")
module.__file__ = path
sys.modules["core.transformer.config"] = module
exec(compile(source[:at] + "\n" + planted + source[at:], path, "exec"), module.__dict__)

from core.checkpointing import CheckpointError, read_checkpoint_settings
from mindspeed_llm.arguments import ArgumentError, parse_args, transformer_config_from_args
from mindspeed_llm.training.training import setup, train

argv = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "1", "--lr", "1e-3",
        "--mock-data", "--vocab-size", "64", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
        "--eval-iters", "0", "--log-interval", "1000", "--num-workers", "0"]
found = {}
args = parse_args(argv + ["--planted-width", "9"])
found["parser"] = args.planted_width
found["config"] = transformer_config_from_args(args).planted_width
yaml_file = os.path.join(out, "model.yaml")
open(yaml_file, "w").write("planted-width: 5\n")
found["yaml"] = parse_args(argv + ["--yaml-cfg", yaml_file]).planted_width
save = os.path.join(out, "ckpt")
train(setup(argv + ["--planted-width", "9", "--save", save]))
found["checkpoint"] = read_checkpoint_settings(save)[2].get("planted_width")
loaded = parse_args(argv + ["--load", save, "--use-checkpoint-args", "--finetune"])
found["use_checkpoint_args"] = [loaded.planted_width, transformer_config_from_args(loaded).planted_width]
try:
    parse_args(argv + ["--load", save, "--use-checkpoint-args", "--planted-width", "8"])
except ArgumentError as error:
    found["contradiction"] = str(error)
try:
    setup(argv + ["--load", save, "--finetune", "--planted-width", "8"])
except CheckpointError as error:
    found["saved_settings"] = str(error)
print(json.dumps(found))
'''


def test_adding_a_field_is_one_line(tmp_path: Path) -> None:
    """One planted line in ModelConfig reaches the parser, YAML, the config, a checkpoint and its loads."""
    source = CONFIG_SOURCE.read_text(encoding="utf-8")
    assert source.count(END_OF_MODEL_CONFIG) == 1
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    child = subprocess.run([sys.executable, "-c", CHILD, str(CONFIG_SOURCE), PLANTED, END_OF_MODEL_CONFIG,
                            str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    found = json.loads(child.stdout.strip().splitlines()[-1])
    assert found["parser"] == 9 and found["config"] == 9 and found["yaml"] == 5
    assert found["checkpoint"] == 9
    assert found["use_checkpoint_args"] == [9, 9]
    assert found["contradiction"].startswith("--planted-width 8 contradicts the checkpoint's 9 (")
    assert "was trained with --planted-width 9, this run has 8" in found["saved_settings"]


def test_every_field_has_a_flag_or_a_derivation() -> None:
    """The args -> config step can set every field: through its flag (which the parser has) or a derivation."""
    dests = {action.dest for action in build_parser()._actions}
    for config_field in fields(TransformerConfig):
        if config_field.name == "vocab_size":  # given by the tokenizer (or --vocab-size)
            continue
        if field_spec(config_field).flag is None:
            assert config_field.name in CONFIG_DERIVATIONS, config_field.name
        else:
            assert config_flag_dest(config_field) in dests, config_field.name
    assert {f.name for f in table_flag_fields()} | set(CONFIG_DERIVATIONS) >= {
        f.name for f in fields(TransformerConfig)} - {"vocab_size"}


def test_architecture_and_run_time_split_the_fields() -> None:
    names = [f.name for f in fields(TransformerConfig)]
    assert len(names) == len(set(names)) == len(architecture_fields()) + len(runtime_fields())
    assert set(architecture_fields()) == {f.name for f in fields(ModelConfig)}
    assert RUNTIME_CONFIG_FIELDS == {f.name for f in fields(RuntimeConfig)}
    assert {"tensor_model_parallel_size", "recompute_granularity", "use_flash_attn", "params_dtype",
            "hidden_dropout"} <= RUNTIME_CONFIG_FIELDS
    assert {"num_layers", "hidden_size", "activation", "num_experts", "noop_layers"} <= set(architecture_fields())


def test_feature_lists_are_queries_on_the_table() -> None:
    assert "moe_router_topk" in feature_fields(MOE) and "expert_model_parallel_size" in feature_fields(MOE)
    assert "num_experts" not in feature_fields(MOE)  # it turns MoE on: never refused for being unused
    assert "mamba_state_dim" in feature_fields(MAMBA) and "hybrid_override_pattern" not in feature_fields(MAMBA)
    assert "qk_norm" in feature_fields(ATTENTION) and "num_layers" not in feature_fields(ATTENTION)


ARGV = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--vocab-size", "64"]


@pytest.mark.parametrize("switches, activation", [
    ([], "gelu"), (["--swiglu"], "swiglu"), (["--geglu", "--gelu-tanh"], "geglu_tanh"), (["--gelu-tanh"], "gelu_tanh"),
    (["--gated-mlp", "--squared-relu"], "gated_squared_relu"), (["--gated-mlp"], "geglu"), (["--xielu"], "xielu"),
    (["--quick-geglu"], "quick_geglu"), (["--relu"], "relu"),
])
def test_legacy_switches_spell_the_activation(switches, activation) -> None:
    """The legacy flags are aliases of --activation: the same config either way."""
    legacy = parse_args(ARGV + switches)
    validate_args(legacy, 1)
    named = parse_args(ARGV + ["--activation", activation])
    validate_args(named, 1)
    assert transformer_config_from_args(legacy) == transformer_config_from_args(named)
    assert transformer_config_from_args(named).activation == activation


def test_an_activation_and_a_switch_that_disagree_are_refused() -> None:
    with pytest.raises(ArgumentError, match="^--activation relu and --swiglu both set the MLP activation; choose one$"):
        validate_args(parse_args(ARGV + ["--activation", "relu", "--swiglu"]), 1)
    validate_args(parse_args(ARGV + ["--activation", "swiglu", "--swiglu"]), 1)  # the same activation: fine


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_older_checkpoints_boolean_fields_still_load(activation: str) -> None:
    """A checkpoint saved when each activation was a boolean field loads (from_dict, the saved-settings check)."""
    today = TransformerConfig(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=64,
                              activation=activation)
    stored = {name: value for name, value in today.to_dict().items() if name != "activation"}
    stored.update(activation_switches(activation))  # the older layout: eight booleans
    assert TransformerConfig.from_dict(stored) == today
    assert architecture_settings(stored)["activation"] == activation
