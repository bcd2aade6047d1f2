"""Preference losses on sequence log-probabilities: DPO (sigmoid, hinge, IPO), SimPO and Bradley-Terry.

Each takes per-pair tensors ``[b]`` and returns the per-pair losses ``[b]`` (the task averages them) and
the rewards of both replies ``[b]`` (TRL's meanings: what the loss compares).

- DPO (Rafailov et al.): ``h = (log pi(c) - log pi(r)) - (log ref(c) - log ref(r))``;
  sigmoid: ``-(1 - eps) log sigma(beta h) - eps log sigma(-beta h)`` (cDPO label smoothing ``eps``);
  hinge (SLiC): ``max(0, 1 - beta h)``; IPO: ``(h - 1 / (2 beta))^2``, on length-normalised log-probs
  (the caller passes means over tokens, as TRL and LLaMA-Factory do). Rewards: ``beta (log pi - log ref)``.
- SimPO (Meng et al.): no reference; ``h = mean log pi(c) - mean log pi(r) - gamma / beta`` on
  length-normalised log-probs; sigmoid (with label smoothing) or hinge on ``beta h``. Rewards:
  ``beta * mean log pi``.
- Bradley-Terry (reward models): ``-log sigma(r_c - r_r)`` on the scalar scores.
"""
from __future__ import annotations

from typing import Tuple

import torch
import torch.nn.functional as F

DPO_LOSS_TYPES = ("sigmoid", "hinge", "ipo")
SIMPO_LOSS_TYPES = ("sigmoid", "hinge")
Losses = Tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # per-pair losses, chosen rewards, rejected rewards


def smoothed_sigmoid_loss(logits: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """``-(1 - eps) log sigma(x) - eps log sigma(-x)`` ``[b]`` of ``logits`` ``[b]`` (``eps`` = label smoothing)."""
    return -(1.0 - label_smoothing) * F.logsigmoid(logits) - label_smoothing * F.logsigmoid(-logits)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, reference_chosen: torch.Tensor,
             reference_rejected: torch.Tensor, beta: float, loss_type: str = "sigmoid",
             label_smoothing: float = 0.0) -> Losses:
    """DPO losses ``[b]`` and rewards ``[b]`` from the sequence log-probs ``[b]`` of policy and reference."""
    chosen_ratio = policy_chosen - reference_chosen  # [b] log pi(c) / ref(c)
    rejected_ratio = policy_rejected - reference_rejected
    logits = chosen_ratio - rejected_ratio  # [b]
    if loss_type == "sigmoid":
        losses = smoothed_sigmoid_loss(beta * logits, label_smoothing)
    elif loss_type == "hinge":
        losses = torch.relu(1.0 - beta * logits)
    elif loss_type == "ipo":
        losses = (logits - 1.0 / (2.0 * beta)) ** 2
    else:
        raise ValueError(f"DPO loss type {loss_type!r} is not one of {DPO_LOSS_TYPES}")
    return losses, beta * chosen_ratio.detach(), beta * rejected_ratio.detach()


def simpo_loss(policy_chosen_mean: torch.Tensor, policy_rejected_mean: torch.Tensor, beta: float,
               gamma_beta_ratio: float, loss_type: str = "sigmoid", label_smoothing: float = 0.0) -> Losses:
    """SimPO losses ``[b]`` and rewards ``[b]`` from length-normalised sequence log-probs ``[b]``."""
    logits = policy_chosen_mean - policy_rejected_mean - gamma_beta_ratio  # [b]
    if loss_type == "sigmoid":
        losses = smoothed_sigmoid_loss(beta * logits, label_smoothing)
    elif loss_type == "hinge":
        losses = torch.relu(1.0 - beta * logits)
    else:
        raise ValueError(f"SimPO loss type {loss_type!r} is not one of {SIMPO_LOSS_TYPES}")
    return losses, beta * policy_chosen_mean.detach(), beta * policy_rejected_mean.detach()


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """``-log sigma(r_c - r_r)`` ``[b]`` of a reward model's scores ``[b]``."""
    return -F.logsigmoid(chosen_scores - rejected_scores)
