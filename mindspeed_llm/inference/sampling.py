"""Choosing the next token from full-vocabulary logits ``[b, v]``.

Order as in ``transformers``' ``generate``: the repetition penalty first, then (sampling only) temperature,
top-k and top-p, then greedy argmax or a multinomial draw from a ``torch.Generator`` (a fixed seed repeats a
run, and every TP rank draws the same token), or from one generator per row (each row's draws then do not
depend on the other rows of the batch: GRPO's rollouts are the same at every data-parallel layout).

- Repetition penalty (CTRL; Hugging Face's rule): the logit of every token already in the row (prompt or
  generated) is divided by ``penalty`` when positive and multiplied by it when negative.
- Top-k: logits below the k-th largest become ``-inf``.
- Top-p (nucleus): the most probable tokens whose probability mass first reaches ``p`` are kept (always at
  least one); the rest become ``-inf``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Tuple, Union

import torch


@dataclass(frozen=True)
class SamplingConfig:
    """How the next token is chosen (``--task greedy|do_sample``, ``--temperature``, ``--top-k``, ...)."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    repetition_penalty: float = 1.0  # 1: off

    def __post_init__(self) -> None:
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"--top-p {self.top_p} is outside (0, 1]; use e.g. --top-p 0.9 (1 turns it off)")
        if self.temperature <= 0.0:
            raise ValueError(f"--temperature {self.temperature} must be > 0 (use --task greedy for argmax)")
        if self.top_k < 0:
            raise ValueError(f"--top-k {self.top_k} must be >= 0 (0 turns it off)")
        if self.repetition_penalty <= 0.0:
            raise ValueError(f"--repetition-penalty {self.repetition_penalty} must be > 0 (1 turns it off)")


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """``logits`` [b, v] with every ``seen`` [b, v] (bool) token's logit divided (positive) or multiplied
    (negative) by ``penalty``."""
    if penalty == 1.0:
        return logits
    penalised = torch.where(logits > 0, logits / penalty, logits * penalty)
    return torch.where(seen, penalised, logits)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """``logits`` [b, v] with everything below each row's k-th largest logit set to ``-inf`` (k 0: unchanged)."""
    if k <= 0 or k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, k, dim=-1).values[:, -1:]  # [b, 1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """``logits`` [b, v] keeping, per row, the most probable tokens until their mass reaches ``p``."""
    if p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # [b, v]
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = torch.cumsum(probs, dim=-1) - probs  # the mass of the more probable tokens
    drop_sorted = mass_before >= p
    drop_sorted[:, 0] = False  # the most probable token always stays
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def processed_logits(logits: torch.Tensor, seen: torch.Tensor, config: SamplingConfig) -> torch.Tensor:
    """The logits [b, v] (fp32) the token is chosen from, after the penalty and, when sampling, the warpers."""
    logits = apply_repetition_penalty(logits.float(), seen, config.repetition_penalty)
    if not config.do_sample:
        return logits
    if config.temperature != 1.0:
        logits = logits / config.temperature
    return top_p_filter(top_k_filter(logits, config.top_k), config.top_p)


def next_tokens(logits: torch.Tensor, seen: torch.Tensor, config: SamplingConfig,
                generator: Union[None, torch.Generator, List[torch.Generator]] = None
                ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The next token of each row ``[b]`` and the logits it was chosen from ``[b, v]``; ``generator`` is one
    for the batch or a list of one per row."""
    scores = processed_logits(logits, seen, config)
    if not config.do_sample:
        return scores.argmax(dim=-1), scores
    probs = torch.softmax(scores, dim=-1)
    if isinstance(generator, list):  # row r draws from generator[r] only
        drawn = torch.cat([torch.multinomial(row.unsqueeze(0).to(g.device), 1, generator=g).view(1)
                           for row, g in zip(probs, generator)])  # [b]
        return drawn.to(logits.device), scores
    # the draw runs on the generator's device (CPU by default), the same on every rank
    device = generator.device if generator is not None else probs.device
    drawn = torch.multinomial(probs.to(device), 1, generator=generator).squeeze(-1)
    return drawn.to(logits.device), scores
