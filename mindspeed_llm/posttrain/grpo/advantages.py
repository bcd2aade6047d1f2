"""Group-relative advantages: each prompt's ``num_generations`` rewards are compared with each other.

``rewards`` ``[n]`` holds ``n = prompts * num_generations`` values, the samples of one prompt contiguous
(the order the rollout writes them). Per group ``g``:

- ``scale_rewards=True`` (GRPO): ``A = (r - mean_g) / (std_g + eps)``;
- ``scale_rewards=False`` (Dr. GRPO, Liu et al.): ``A = r - mean_g`` (no division by the group's spread).

The std is the unbiased (Bessel-corrected, ``n - 1``) one, as TRL's GRPOTrainer computes it
(``trl.trainer.utils.nanstd`` multiplies the variance by ``count / (count - 1)``); ``eps`` defaults to TRL's
``1e-4``. A group whose rewards are all equal gets advantages 0 in both modes.
"""
from __future__ import annotations

import torch

from mindspeed_llm.flags import ArgumentError

DEFAULT_EPS = 1e-4


def check_num_generations(num_generations: int) -> None:
    """Refuse groups of fewer than two samples in one line: ``r - mean`` of a group of one is always 0."""
    if num_generations < 2:
        raise ArgumentError(
            f"--num-generations {num_generations} with group normalisation gives every sample an advantage "
            f"of 0 (r - its group's mean) and nothing to learn; use --num-generations 2 or more")


def group_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: bool = True,
                     eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Advantages ``[n]`` of ``rewards`` ``[n]`` normalised within each group of ``num_generations``."""
    check_num_generations(num_generations)
    if rewards.dim() != 1 or rewards.numel() % num_generations != 0:
        raise ValueError(f"rewards of shape {tuple(rewards.shape)} do not split into groups of "
                         f"--num-generations {num_generations}")
    grouped = rewards.view(-1, num_generations)  # [prompts, g]
    centred = grouped - grouped.mean(dim=1, keepdim=True)  # [prompts, g]
    if scale_rewards:
        centred = centred / (grouped.std(dim=1, correction=1, keepdim=True) + eps)
    return centred.reshape(-1)  # [n]
