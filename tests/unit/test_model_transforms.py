"""Model transforms (``mindspeed_llm/transforms/``): a new one plugs in through the registry alone.

A dummy transform registered here (no edit of the trainer) is applied to every chunk on the meta device at
build, decides what the run's checkpoint holds (it leaves layer 1 out and adds its own record), loads the
``--load`` checkpoint into the model itself and runs its load hook after it. Then: the trainer and the
runtime name no transform, the training folder imports nothing from the post-training one, and the built-in
LoRA / QLoRA modules do not import each other in a cycle.

    python -m pytest -q tests/unit/test_model_transforms.py
"""
from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import pytest
import torch
from torch import nn

from core import checkpointing
from mindspeed_llm.runtime import LoadedCheckpoint
from mindspeed_llm.transforms.base import ModelTransform, TransformContext, register_transform, unregister_transform
from mindspeed_llm.transforms.registry import build_transforms
from mindspeed_llm.training.training import setup

ROOT = Path(__file__).resolve().parents[2]
ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-3", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5", "--device", "cpu",
    "--eval-iters", "0", "--log-interval", "1000",
]
LEFT_OUT = "decoder.layers.1."
RECORD = "dummy_transform"


class DummyTransform(ModelTransform):
    """Leaves layer 1 out of the checkpoints it writes and loads; records every hook it ran."""

    name = "dummy"

    def __init__(self) -> None:
        self.calls: List[str] = []

    def check(self, args: argparse.Namespace, meta_model: Callable[[], nn.Module]) -> None:
        assert next(meta_model().parameters()).device.type == "meta"
        self.calls.append("check")

    def on_meta_model(self, model: nn.Module) -> None:
        self.calls.append(f"build on {next(model.parameters()).device.type}")
        model.dummy_applied = True

    def save_state(self, payload: Dict[str, Any], models: Sequence[nn.Module]) -> Dict[str, Any]:
        for key in checkpointing.model_keys(payload):
            payload[key] = {name: value for name, value in payload[key].items() if not name.startswith(LEFT_OUT)}
        payload[RECORD] = {"left_out": LEFT_OUT}
        self.calls.append("save")
        return payload

    def load_base(self, models: Sequence[nn.Module], content: Dict[str, Any], path: str) -> bool:
        assert content[RECORD] == {"left_out": LEFT_OUT}
        for model, key in zip(models, checkpointing.model_keys(content)):
            missing = model.load_state_dict(content[key], strict=False).missing_keys
            assert missing and all(name.startswith(LEFT_OUT) for name in missing), missing
        self.calls.append("load")
        return True

    def after_load(self, context: TransformContext) -> Optional[LoadedCheckpoint]:
        self.calls.append("after load")
        return None


@pytest.fixture
def dummy():
    made: List[DummyTransform] = []

    def factory(args: argparse.Namespace) -> DummyTransform:
        made.append(DummyTransform())
        return made[-1]

    register_transform(DummyTransform.name, factory)
    try:
        yield made
    finally:
        unregister_transform(DummyTransform.name)


def test_a_registered_transform_is_built_saved_and_loaded(tmp_path, dummy) -> None:
    save = str(tmp_path / "ckpt")
    trainer = setup(ARGV + ["--save", save])
    assert [type(t) for t in trainer.transforms] == [DummyTransform] and trainer.model.dummy_applied
    assert dummy[0].calls == ["check", "build on meta", "after load"]  # no --load: its hook still runs
    trainer.train_step(trainer.train_iterator())
    trainer.save()
    assert dummy[0].calls[-1] == "save"
    saved = checkpointing.load_file(checkpointing.find_checkpoint(save, 0, 0, 1)[0])
    assert saved[RECORD] == {"left_out": LEFT_OUT}
    assert saved["model"] and not any(name.startswith(LEFT_OUT) for name in saved["model"])
    resumed = setup(ARGV + ["--load", save])
    assert dummy[1].calls == ["check", "build on meta", "load", "after load"] and resumed.iteration == 1
    trained, fresh = dict(trainer.model.named_parameters()), dict(setup(ARGV).model.named_parameters())
    for name, param in resumed.model.named_parameters():
        source = fresh if name.startswith(LEFT_OUT) else trained  # layer 1 keeps its initialisation
        assert torch.equal(param, source[name]), name


def test_without_its_flags_a_transform_is_not_built(dummy) -> None:
    from mindspeed_llm.arguments import parse_args, transformer_config_from_args

    args = parse_args(ARGV)
    unregister_transform(DummyTransform.name)
    assert build_transforms(args, transformer_config_from_args(args)) == []  # LoRA/QLoRA: no flags, none
    register_transform(DummyTransform.name, lambda args: None)
    assert build_transforms(args, transformer_config_from_args(args)) == []


def _imports(path: Path) -> List[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_the_trainer_and_the_runtime_name_no_transform() -> None:
    training = sorted((ROOT / "mindspeed_llm" / "training").glob("*.py"))
    for path in training + [ROOT / "mindspeed_llm" / "runtime.py"]:
        names = _imports(path)
        assert not [n for n in names if n.startswith("mindspeed_llm.posttrain")], path  # no folder loop
        assert not [n for n in names if "lora" in n.lower()], path
        assert "lora" not in path.read_text().lower(), path


def test_lora_and_qlora_do_not_import_each_other_in_a_cycle() -> None:
    transforms = ROOT / "mindspeed_llm" / "transforms"
    lora, qlora = _imports(transforms / "lora.py"), _imports(transforms / "qlora.py")
    assert not [n for n in lora if n.startswith("mindspeed_llm.transforms.qlora")]
    assert "mindspeed_llm.transforms.lora" in qlora  # QLoRA builds on LoRA, one way
    for path in transforms.glob("*.py"):
        assert not [n for n in _imports(path) if n.startswith(("mindspeed_llm.training", "mindspeed_llm.posttrain"))]
    assert os.path.isfile(transforms / "registry.py")
