"""The q/k norm is one config field, ``qk_norm``, set by ``--qk-norm KIND``.

The Megatron/MindSpeed switches (``--qk-layernorm``, ``--qk-layernorm-full-width``,
``--qk-layernorm-per-head-weights``, ``--non-parametric-qk-norm``, ``--qk-l2-norm``)
stay accepted and spell the same field; combinations that spell no kind keep
their one-line errors; a checkpoint saved when each was a boolean field loads,
through ``from_dict``, the saved-settings check and ``--use-checkpoint-args``.

    python -m pytest tests/unit/test_qk_norm_field.py -q
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch

from core.checkpointing import CHECKPOINT_FILENAME, TRACKER_FILENAME, iteration_dir, rank_dir_name
from core.transformer.config import (QK_NORMS, TransformerConfig, architecture_settings, qk_norm_flags,
                                     qk_norm_from_switches, qk_norm_switches)
from mindspeed_llm.arguments import ArgumentError, parse_args, transformer_config_from_args, validate_args

ARGV = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-3", "--vocab-size", "64",
        "--normalization", "RMSNorm"]
SIZES = dict(num_layers=2, hidden_size=32, num_attention_heads=4, vocab_size=64, normalization="RMSNorm")

# the legacy switches as a user types them -> the kind they spell
SPELLINGS = [
    ([], "none"),
    (["--qk-layernorm"], "per_head"),
    (["--qk-layernorm", "--qk-layernorm-full-width"], "full_width"),
    (["--qk-layernorm", "--qk-layernorm-per-head-weights"], "per_head_weights"),
    (["--qk-layernorm", "--non-parametric-qk-norm"], "non_parametric"),
    (["--qk-l2-norm"], "l2"),
]


def _config(argv: List[str]) -> TransformerConfig:
    args = parse_args(ARGV + argv)
    validate_args(args, 1)
    return transformer_config_from_args(args)


@pytest.mark.parametrize("switches, kind", SPELLINGS, ids=[kind for _, kind in SPELLINGS])
def test_legacy_switches_spell_the_kind(switches: List[str], kind: str) -> None:
    """The legacy flags are aliases of --qk-norm: the same config either way."""
    legacy, named = _config(switches), _config(["--qk-norm", kind])
    assert legacy.qk_norm == named.qk_norm == kind
    assert legacy == named
    assert qk_norm_flags(kind) == " ".join(switches)


@pytest.mark.parametrize("kind", QK_NORMS)
def test_switches_and_kind_are_inverses(kind: str) -> None:
    assert qk_norm_from_switches(qk_norm_switches(kind)) == kind


def test_the_flag_and_a_switch_that_disagree_are_refused() -> None:
    with pytest.raises(ArgumentError, match="^--qk-norm full_width and --qk-layernorm both set the q/k norm; "
                                            "choose one$"):
        _config(["--qk-norm", "full_width", "--qk-layernorm"])
    assert _config(["--qk-norm", "per_head", "--qk-layernorm"]).qk_norm == "per_head"  # the same kind: fine


@pytest.mark.parametrize("switches, message", [
    (["--qk-layernorm-full-width"], "--qk-layernorm-full-width needs --qk-layernorm and --normalization RMSNorm"),
    (["--qk-layernorm", "--qk-layernorm-full-width", "--non-parametric-qk-norm"],
     "--non-parametric-qk-norm needs --qk-layernorm (per head, no --qk-layernorm-full-width)"),
    (["--qk-layernorm", "--non-parametric-qk-norm", "--qk-layernorm-per-head-weights"],
     "--non-parametric-qk-norm and --qk-layernorm-per-head-weights both set the q/k norm's weight; choose one"),
    (["--qk-l2-norm", "--qk-layernorm"],
     "--qk-l2-norm is a q/k norm of its own; drop --qk-layernorm (and it does not apply to --multi-latent-attention)"),
    (["--qk-norm", "full_width", "--qk-layernorm-after-rope"],
     "--qk-layernorm-after-rope needs --qk-layernorm (per-head norms, without --qk-layernorm-full-width)"),
    (["--qk-norm", "l2", "--qk-layernorm-after-rope"],
     "--qk-layernorm-after-rope needs --qk-layernorm (per-head norms, without --qk-layernorm-full-width)"),
    (["--qk-norm", "full_width", "--normalization", "LayerNorm"],
     "--qk-layernorm-full-width needs --qk-layernorm and --normalization RMSNorm"),
])
def test_combinations_that_spell_no_kind_are_one_line_errors(switches: List[str], message: str) -> None:
    with pytest.raises(ArgumentError) as error:
        _config(switches)
    assert str(error.value) == message


@pytest.mark.parametrize("after_rope", [False, True])
@pytest.mark.parametrize("kind", QK_NORMS)
def test_older_checkpoints_boolean_fields_still_load(kind: str, after_rope: bool) -> None:
    """Settings stored when each q/k norm was a boolean field load (from_dict, the saved-settings check)."""
    if after_rope and kind not in ("per_head", "per_head_weights", "non_parametric"):
        return
    today = TransformerConfig(**SIZES, qk_norm=kind, qk_layernorm_after_rope=after_rope)
    stored = _older_layout(today)
    assert TransformerConfig.from_dict(stored) == today
    assert architecture_settings(stored)["qk_norm"] == kind
    assert not set(qk_norm_switches(kind)) & set(architecture_settings(stored))


def _older_layout(config: TransformerConfig) -> Dict[str, Any]:
    """``config.to_dict()`` as an older checkpoint stored it: five q/k booleans instead of ``qk_norm``."""
    stored = {name: value for name, value in config.to_dict().items() if name != "qk_norm"}
    stored.update(qk_norm_switches(config.qk_norm))
    return stored


def _write_older_checkpoint(root: Path, config: TransformerConfig) -> None:
    """A checkpoint directory whose rank file stores the older settings (no weights: only its settings are read)."""
    rank_file = Path(iteration_dir(str(root), 1, False)) / rank_dir_name(0, 0, 1) / CHECKPOINT_FILENAME
    os.makedirs(rank_file.parent)
    torch.save({"args": argparse.Namespace(), "transformer_config": _older_layout(config)}, rank_file)
    (root / TRACKER_FILENAME).write_text("1")


@pytest.mark.parametrize("kind", ["full_width", "l2"])
def test_use_checkpoint_args_on_an_older_checkpoint(kind: str, tmp_path: Path) -> None:
    """--use-checkpoint-args takes the kind from the booleans; a switch that spells another kind is refused."""
    _write_older_checkpoint(tmp_path, TransformerConfig(**SIZES, qk_norm=kind))
    load = ["--load", str(tmp_path), "--use-checkpoint-args", "--finetune"]
    assert _config(load).qk_norm == kind
    assert _config(load + qk_norm_flags(kind).split()).qk_norm == kind  # the same kind spelled: fine
    with pytest.raises(ArgumentError, match=f"^--qk-layernorm contradicts the checkpoint's --qk-norm {kind} \\("):
        _config(load + ["--qk-layernorm"])
