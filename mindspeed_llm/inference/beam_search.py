"""Beam search (``--task beam_search``), with the rules of ``transformers``' ``generate(num_beams=N)``.

Every prompt keeps ``N`` running beams, scored by the sum of their tokens' log-probabilities (after the
repetition penalty, applied to the log-probabilities as Hugging Face's processors are). At each step the
``max(2, 1 + #eos) N`` best continuations over all beams are taken; those ending on an EOS token, or
reaching ``max_new_tokens``, among the first ``N`` become finished hypotheses scored
``sum log p / length ** length_penalty``; the ``N`` best others run on. A prompt is done when no running
beam can beat its worst finished hypothesis (Hugging Face's ``early_stopping=False`` heuristic: the best
running score at the current length), or, with ``early_stopping=True``, once ``N`` hypotheses are
finished. The result is each prompt's best hypothesis. The beams of all prompts decode as one batch; the
KV cache follows the surviving beams (``KVCache.select_rows``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import torch

from core.models.gpt_model import GPTModel
from mindspeed_llm.inference.engine import (Generation, GenerationConfig, build_decoder, check_prompts,
                                            model_device, new_token_budget, seen_tokens)
from mindspeed_llm.inference.sampling import apply_repetition_penalty

NEG = -1.0e9  # the score of an impossible hypothesis


@dataclass(frozen=True)
class BeamConfig:
    num_beams: int = 4
    length_penalty: float = 1.0
    early_stopping: Union[bool, str] = False  # True: stop at N finished; "never": the canonical bound

    def __post_init__(self) -> None:
        if self.num_beams < 1:
            raise ValueError(f"--num-beams {self.num_beams} must be at least 1")


@dataclass
class _Finished:
    """The best ``N`` finished hypotheses of every prompt: scores [B, N] (sorted), their ids, filled flags."""

    scores: torch.Tensor
    ids: List[List[List[int]]]
    filled: torch.Tensor

    @classmethod
    def empty(cls, batch: int, beams: int) -> "_Finished":
        return cls(torch.full((batch, beams), NEG), [[[] for _ in range(beams)] for _ in range(batch)],
                   torch.zeros(batch, beams, dtype=torch.bool))

    def merge(self, scores: torch.Tensor, ids: List[List[List[int]]], new: torch.Tensor) -> None:
        """Add candidates (scores [B, K], their ids, whether each just finished [B, K]); keep the best N."""
        beams = self.scores.size(1)
        merged = torch.cat([self.scores, scores], dim=1)  # [B, N + K]
        flags = torch.cat([self.filled, new], dim=1)
        best = torch.topk(merged, beams, dim=1).indices  # [B, N]
        self.ids = [[(self.ids[b] + ids[b])[i] for i in best[b].tolist()] for b in range(len(ids))]
        self.scores, self.filled = merged.gather(1, best), flags.gather(1, best)


def _can_improve(running: torch.Tensor, finished: _Finished, length: int, budget: int,
                 beams: BeamConfig) -> torch.Tensor:
    """[B]: whether a prompt's best running beam may still beat one of its finished hypotheses."""
    best_length = budget if beams.early_stopping == "never" and beams.length_penalty > 0 else length
    best_possible = running[:, :1] / (best_length ** beams.length_penalty)  # [B, 1]
    worst = torch.where(finished.filled, finished.scores.min(dim=1, keepdim=True).values,
                        torch.full_like(finished.scores, NEG))  # [B, N]
    return (best_possible > worst).any(dim=1)


@torch.no_grad()
def beam_search(model: GPTModel, prompts: Sequence[Sequence[int]], config: GenerationConfig, beams: BeamConfig,
                use_cache: Optional[bool] = None) -> Generation:
    """Each prompt's best beam (generated ids) under ``beams``; ``config`` gives the length, EOS ids, penalty."""
    check_prompts(prompts, model.config.max_position_embeddings)
    batch, width = len(prompts), beams.num_beams
    budget = new_token_budget(model, prompts, config.max_new_tokens)
    rows = [prompt for prompt in prompts for _ in range(width)]  # beam j of prompt b is row b N + j
    decoder = build_decoder(model, rows, budget, config.pad_token_id, use_cache)
    seen = seen_tokens(rows, model.config.vocab_size, model_device(model))
    eos = set(config.eos_token_ids)
    keep = max(2, 1 + len(eos)) * width
    running = torch.full((batch, width), NEG)
    running[:, 0] = 0.0  # the beams start equal: only the first one expands
    running_ids: List[List[List[int]]] = [[[] for _ in range(width)] for _ in range(batch)]
    finished = _Finished.empty(batch, width)
    improvable = torch.ones(batch, dtype=torch.bool)
    logits = decoder.prefill()  # [B N, V]
    for step in range(budget):
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        log_probs = apply_repetition_penalty(log_probs, seen, config.sampling.repetition_penalty).cpu()
        vocab = log_probs.size(-1)
        totals = (log_probs.view(batch, width, vocab) + running[:, :, None]).view(batch, width * vocab)
        top_scores, top_index = torch.topk(totals, keep, dim=1)  # [B, K]
        origin, tokens = top_index // vocab, top_index % vocab
        candidates = [[running_ids[b][origin[b, k]] + [int(tokens[b, k])] for k in range(keep)]
                      for b in range(batch)]
        last = step == budget - 1
        hits = torch.tensor([[last or int(t) in eos for t in row] for row in tokens.tolist()])  # [B, K]
        # the running beams of the next step: the best N continuations that did not finish
        open_scores = top_scores + hits.float() * NEG
        chosen = torch.topk(open_scores, width, dim=1).indices  # [B, N]
        # finished hypotheses: only among the first N candidates, while the prompt can still improve
        just_finished = hits & (torch.arange(keep) < width)[None, :]
        scored = top_scores / ((step + 1) ** beams.length_penalty)
        blocked = ~improvable[:, None] | ~just_finished
        if beams.early_stopping is True:
            blocked = blocked | finished.filled.all(dim=1, keepdim=True)
        finished.merge(scored + blocked.float() * NEG, candidates, just_finished)
        running = open_scores.gather(1, chosen)
        running_ids = [[candidates[b][k] for k in chosen[b].tolist()] for b in range(batch)]
        improvable = improvable & _can_improve(running, finished, step + 1, budget, beams)
        done = not improvable.any() or hits.all() or (beams.early_stopping is True and finished.filled.all())
        if done or last:
            break
        source_rows = [b * width + int(origin[b, k]) for b in range(batch) for k in chosen[b].tolist()]
        next_tokens = [int(tokens[b, k]) for b in range(batch) for k in chosen[b].tolist()]
        decoder.select_rows(source_rows)
        seen = seen[torch.tensor(source_rows, device=seen.device)]
        seen[torch.arange(len(next_tokens), device=seen.device), torch.tensor(next_tokens, device=seen.device)] = True
        logits = decoder.step(next_tokens, [True] * len(next_tokens))
    best = [finished.ids[b][0] for b in range(batch)]
    reasons = ["eos" if ids and ids[-1] in eos else "length" for ids in best]
    return Generation(best, reasons)
