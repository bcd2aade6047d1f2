"""GRPO's policy loss on per-token log-probs of the sampled completions.

Per token (``A`` the sequence's advantage, ``ratio = exp(logp - old_logp)``, DAPO's decoupled clip):

    loss_t = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A) + kl_coef * kl_t
    kl_t   = exp(ref - logp) - (ref - logp) - 1          (Schulman's k3 estimator of KL(pi || ref))

then aggregated over the completion tokens (``mask`` 1) by ``loss_type``, as TRL's GRPOTrainer does:

- ``grpo``: mean over each sequence's tokens, then mean over the sequences;
- ``bnpo``: mean over all tokens of the (micro-)batch;
- ``dr_grpo``: sum over all tokens / (number of sequences * ``max_completion_length``);
- ``dapo``: sum over all tokens / the token count of the global batch (``num_global_tokens``: every
  micro-batch of the step, every data-parallel rank; the local count when not given), so that the step's
  micro-batch losses add up to one token-level mean.

Logged statistics (token means over the mask, TRL's definitions): ``clip_low`` the fraction of tokens with
``ratio < 1 - eps_low`` and ``A < 0`` (the clip removed their gradient), ``clip_high`` those with
``ratio > 1 + eps_high`` and ``A > 0``, ``clip_region`` either; ``kl`` the mean k3 KL (0 without a reference).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from mindspeed_llm.entry_flags import GRPO_LOSS_TYPES as LOSS_TYPES  # the --loss-type choices, declared once


@dataclass
class PolicyLossOutput:
    """The loss (a scalar with its graph) and its detached statistics (scalars)."""
    loss: torch.Tensor
    kl: torch.Tensor
    clip_low: torch.Tensor
    clip_high: torch.Tensor
    clip_region: torch.Tensor
    num_tokens: torch.Tensor


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """``exp(ref - logp) - (ref - logp) - 1`` ``[b, t]``: non-negative, 0 where policy and reference agree."""
    delta = ref_logp - logp  # [b, t]
    return torch.exp(delta) - delta - 1.0


def clipped_token_loss(ratio: torch.Tensor, advantages: torch.Tensor, eps_low: float,
                       eps_high: float) -> torch.Tensor:
    """``-min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A)`` ``[b, t]``; ``advantages`` ``[b, 1]``."""
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    return -torch.minimum(ratio * advantages, clipped * advantages)


def aggregate(token_loss: torch.Tensor, mask: torch.Tensor, loss_type: str,
              max_completion_length: Optional[int] = None,
              num_global_tokens: Optional[float] = None) -> torch.Tensor:
    """The scalar loss of ``token_loss`` ``[b, t]`` over ``mask`` ``[b, t]`` (float 0/1) by ``loss_type``."""
    masked = token_loss * mask  # [b, t]
    if loss_type == "grpo":
        return (masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("--loss-type dr_grpo divides by --max-completion-length: pass max_completion_length")
        return masked.sum() / (token_loss.size(0) * max_completion_length)
    if loss_type == "dapo":
        denominator = mask.sum().clamp(min=1.0) if num_global_tokens is None else max(float(num_global_tokens), 1.0)
        return masked.sum() / denominator
    raise ValueError(f"--loss-type {loss_type!r} is not one of {LOSS_TYPES}")


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` ``[b, t]`` over ``mask`` ``[b, t]`` (0 when the mask is empty)."""
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                loss_type: str = "grpo", eps_low: float = 0.2, eps_high: Optional[float] = None,
                kl_coef: float = 0.0, ref_logp: Optional[torch.Tensor] = None,
                max_completion_length: Optional[int] = None,
                num_global_tokens: Optional[float] = None) -> PolicyLossOutput:
    """GRPO's loss of the policy's per-token log-probs ``logp`` ``[b, t]`` (with graph).

    ``old_logp`` ``[b, t]``: the rollout policy's (detached); ``advantages`` ``[b]`` or ``[b, t]``;
    ``mask`` ``[b, t]``: 1 on completion tokens; ``eps_high`` defaults to ``eps_low`` (symmetric clip);
    ``ref_logp`` ``[b, t]`` is needed when ``kl_coef`` is not 0.
    """
    eps_high = eps_low if eps_high is None else eps_high
    mask = mask.to(logp.dtype)
    advantages = advantages.to(logp.dtype)
    advantages = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages  # [b, 1] or [b, t]
    ratio = torch.exp(logp - old_logp.detach())  # [b, t]
    token_loss = clipped_token_loss(ratio, advantages, eps_low, eps_high)  # [b, t]
    kl = torch.zeros((), dtype=logp.dtype, device=logp.device)
    if kl_coef != 0.0 or ref_logp is not None:
        if ref_logp is None:
            raise ValueError(f"--kl-coef {kl_coef} needs the reference model's log-probs (ref_logp)")
        token_kl = k3_kl(logp, ref_logp.detach())  # [b, t]
        token_loss = token_loss + kl_coef * token_kl
        kl = masked_mean(token_kl.detach(), mask)
    loss = aggregate(token_loss, mask, loss_type, max_completion_length, num_global_tokens)
    with torch.no_grad():
        low = ((ratio < 1.0 - eps_low) & (advantages < 0)).to(logp.dtype)  # [b, t]
        high = ((ratio > 1.0 + eps_high) & (advantages > 0)).to(logp.dtype)
        return PolicyLossOutput(loss=loss, kl=kl, clip_low=masked_mean(low, mask),
                                clip_high=masked_mean(high, mask),
                                clip_region=masked_mean(torch.clamp(low + high, max=1.0), mask),
                                num_tokens=mask.sum())
