"""The converter's error line and its NaN / Inf refusal.

Every bad input raises :class:`ConversionError`, whose message is one line naming the path or flag and the
fix; the entry prints it as ``convert_ckpt: error: <message>`` and exits 2.
"""
from __future__ import annotations

import sys
from typing import Tuple

import torch
from tqdm import tqdm


class ConversionError(RuntimeError):
    """A bad input; the message is one line naming the path or flag and the fix."""


def check_shape(name: str, tensor: torch.Tensor, expected: Tuple[int, ...]) -> None:
    if tuple(tensor.shape) != expected:
        raise ConversionError(f"{name}: the weights give shape {tuple(tensor.shape)}, the config implies "
                              f"{expected}; the checkpoint does not match its config")


NON_FINITE_FIX = ("the run that saved it diverged or the file is damaged: convert an earlier checkpoint, or pass "
                  "--allow-non-finite to export it anyway")


def refuse_non_finite(what: str, fix: str, allow: bool) -> None:
    """A ConversionError ``what: fix``; with ``--allow-non-finite`` a warning instead (above the progress bar)."""
    if not allow:
        raise ConversionError(f"{what}; {fix}")
    tqdm.write(f"convert_ckpt: warning: {what}; exported as is (--allow-non-finite)", file=sys.stderr)
