"""What a conversion leaves in ``--save-dir``: the refusal to replace a checkpoint by accident, the staging
directory it writes into and the rename that publishes it (markers last)."""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from typing import Any, Dict

from core.checkpointing import TRACKER_FILENAME
from mindspeed_llm.convert.errors import ConversionError

SAFETENSORS_SINGLE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
HF_CONFIG = "config.json"


def target_kind(args: argparse.Namespace) -> str:
    """What the conversion writes: ``checkpoint`` (mg, megatron), ``hf`` (a model) or ``peft`` (adapters)."""
    if args.save_model_type != "hf":
        return "checkpoint"
    return "peft" if args.save_lora_to_hf else "hf"


ITERATION_DIR = re.compile(r"iter_\d{7}")


def replaced_by(kind: str, name: str) -> bool:
    """Whether the entry ``name`` of ``--save-dir`` is part of a checkpoint of ``kind`` (what a conversion of that
    kind replaces; a Megatron checkpoint's ``iter_*`` directories are kept, but their presence needs --overwrite)."""
    from mindspeed_llm.transforms import peft_format

    if kind == "checkpoint":
        return name in (TRACKER_FILENAME, "release")
    if kind == "peft":
        return name in (peft_format.PEFT_CONFIG, peft_format.PEFT_WEIGHTS)
    return name in (HF_CONFIG, SAFETENSORS_INDEX) or (name.endswith(".safetensors")
                                                      and name != peft_format.PEFT_WEIGHTS)


def protect_save_dir(args: argparse.Namespace) -> None:
    """``--save-dir`` is a new or empty directory, or holds nothing the conversion would replace, unless
    ``--overwrite``: a training run's tracker and ``iter_*`` directories or an earlier model stay as they are."""
    save_dir = args.save_dir
    if os.path.lexists(save_dir) and not os.path.isdir(save_dir):
        raise ConversionError(f"--save-dir {save_dir} is a file; give a directory (new or empty)")
    if args.overwrite or not os.path.isdir(save_dir):
        return
    kind = target_kind(args)
    held = sorted(name for name in os.listdir(save_dir)
                  if replaced_by(kind, name) or (kind == "checkpoint" and ITERATION_DIR.fullmatch(name)))
    if held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ConversionError(f"--save-dir {save_dir} already holds a checkpoint ({shown}); converting into it would "
                              "replace it (a training directory's tracker would lose its resume point): give a new "
                              "--save-dir, or pass --overwrite to replace it")


def staging_dir(save_dir: str) -> str:
    """The temporary sibling of ``save_dir`` a conversion writes into (renamed at the end)."""
    parent, name = os.path.split(os.path.abspath(save_dir))
    return os.path.join(parent, f".{name}.converting-{os.getpid()}")


def remove_path(path: str) -> None:
    """Delete a file or a directory tree, if present."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def publish(staging: str, save_dir: str, kind: str) -> None:
    """Move a finished conversion of ``kind`` (:func:`target_kind`) from ``staging`` to ``save_dir``.

    A new ``save_dir`` is one rename. Into an existing one (empty, or ``--overwrite``), the earlier
    checkpoint of the same kind (:func:`replaced_by`: its markers, tracker or ``config.json``, and its
    files, ``release/`` or ``*.safetensors`` and the index) is removed first, the new entries moved in,
    and the new markers moved last: at no moment does the directory look complete with a mix of both.
    Other files (``iter_*`` directories, a model of the other kind) stay.
    """
    if not os.path.exists(save_dir):
        os.rename(staging, save_dir)
        return
    from mindspeed_llm.transforms import peft_format

    markers = (TRACKER_FILENAME, HF_CONFIG, peft_format.PEFT_CONFIG)
    for name in os.listdir(save_dir):
        if replaced_by(kind, name):
            remove_path(os.path.join(save_dir, name))
    names = os.listdir(staging)
    for name in sorted(names, key=lambda n: n in markers):  # markers last
        remove_path(os.path.join(save_dir, name))
        os.rename(os.path.join(staging, name), os.path.join(save_dir, name))
    os.rmdir(staging)


def write_json(path: str, value: Dict[str, Any]) -> None:
    """``value`` as indented JSON at ``path``, written to a temporary name and renamed."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(value, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


