"""How questions are scored: the ``Scorer`` (log-likelihoods) and ``Generator`` (text) protocols.

:class:`ModelScorer` runs plain forward passes of our model (``model(tokens)`` -> this rank's logits
``[b, s, v/tp]``, gathered over TP). Rows are right-padded: the decoder is causal, so a row's logits up to
its own length do not see the padding. Every TP rank runs the same batches. :class:`GreedyGenerator`
decodes through the generation engine (mindspeed_llm/inference/: left-padded batches, the KV cache).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import torch
import torch.nn.functional as F

from core.parallel_state import ParallelState
from core.tensor_parallel.mappings import gather_from_tensor_model_parallel_region
from mindspeed_llm.evaluation.errors import EvaluationError
from mindspeed_llm.inference.engine import GenerationConfig, generate


class Scorer(Protocol):
    def loglikelihoods(self, requests: Sequence[Tuple[str, str]]) -> List[float]:
        """``log p(continuation | context)`` summed over the continuation's tokens, per request."""


class Generator(Protocol):
    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str]) -> List[str]:
        """Each prompt's completion (the new text only), cut at the first of ``stop``."""


class ModelForward:
    """Full-vocabulary log-probabilities of right-padded token rows from our model (TP gathered)."""

    def __init__(self, model: torch.nn.Module, state: ParallelState, vocab_size: int, max_length: int,
                 pad_id: int, device: torch.device, length_multiple: int = 1) -> None:
        self.model, self.state, self.vocab_size = model, state, vocab_size
        self.max_length, self.pad_id, self.device = max_length, pad_id, device
        self.length_multiple = length_multiple  # sequence parallelism splits the sequence over TP

    @torch.no_grad()
    def log_probs(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """``[b, s, vocab]`` fp32 log-softmax for ``rows`` right-padded to a common length ``s``."""
        longest = max(len(row) for row in rows)
        length = -(-longest // self.length_multiple) * self.length_multiple
        tokens = torch.full((len(rows), length), self.pad_id, dtype=torch.long)  # [b, s]
        for index, row in enumerate(rows):
            tokens[index, :len(row)] = torch.tensor(row, dtype=torch.long)
        self.model.eval()
        logits = self.model(tokens.to(self.device))  # [b, s, v/tp]
        logits = gather_from_tensor_model_parallel_region(logits, self.state.tp_group)  # [b, s, v_padded]
        return F.log_softmax(logits[..., :self.vocab_size].float(), dim=-1)  # [b, s, v]

    def fit(self, context: List[int], keep: int) -> List[int]:
        """``context`` cut from the left so that ``keep`` more tokens fit the model's length."""
        room = self.max_length - keep
        if room < 1:
            raise EvaluationError(f"a continuation of {keep} tokens does not fit the model's {self.max_length} "
                                  "positions; raise --max-position-embeddings or shorten the choices")
        return context[-room:]


Plan = Tuple[int, int, List[int]]  # a request's (row index, first scored position, continuation tokens)


class ModelScorer:
    """:class:`Scorer` over our model: a row per request (context then continuation), except that requests
    with the same context and a one-token continuation (answer letters) share one row of the context alone:
    its last logits score every such continuation."""

    def __init__(self, forward: ModelForward, encode: Callable[[str], List[int]],
                 encode_continuation: Callable[[str], List[int]], batch_size: int) -> None:
        # ``encode``: a context (in the prompt template); ``encode_continuation``: a choice's plain tokens
        self.forward, self.encode, self.encode_continuation = forward, encode, encode_continuation
        self.batch_size = batch_size

    def loglikelihoods(self, requests: Sequence[Tuple[str, str]]) -> List[float]:
        unique, plans = self._rows(requests)
        return self._score(unique, plans)

    def _rows(self, requests: Sequence[Tuple[str, str]]) -> Tuple[List[List[int]], List[Plan]]:
        """The distinct token rows to run, and each request's plan over them."""
        index_of: Dict[Tuple[int, ...], int] = {}
        unique: List[List[int]] = []
        plans: List[Plan] = []
        for context, continuation in requests:
            tail = self.encode_continuation(continuation)
            if not tail:
                raise EvaluationError(f"the choice {continuation!r} encodes to no token")
            head = self.forward.fit(self.encode(context), len(tail))
            row = head if len(tail) == 1 else head + tail
            index = index_of.setdefault(tuple(row), len(unique))
            if index == len(unique):
                unique.append(row)
            plans.append((index, len(head) - 1, tail))  # the logits at position p predict token p + 1
        return unique, plans

    def _score(self, unique: List[List[int]], plans: List[Plan]) -> List[float]:
        """Each plan's summed log-probability, the rows run ``batch_size`` at a time."""
        plans_of_row: Dict[int, List[int]] = {}
        for number, (index, _, _) in enumerate(plans):
            plans_of_row.setdefault(index, []).append(number)
        scores: List[float] = [0.0] * len(plans)
        for start in range(0, len(unique), self.batch_size):
            log_probs = self.forward.log_probs(unique[start:start + self.batch_size])  # [b, s, v]
            for index in range(start, min(start + self.batch_size, len(unique))):
                for number in plans_of_row[index]:
                    _, first, tail = plans[number]
                    positions = torch.arange(first, first + len(tail), device=log_probs.device)
                    targets = torch.tensor(tail, dtype=torch.long, device=log_probs.device)
                    scores[number] = float(log_probs[index - start, positions, targets].sum())
        return scores


class GreedyGenerator:
    """:class:`Generator` by argmax decoding through the generation engine (``mindspeed_llm/inference``:
    left-padded batches, the KV cache)."""

    def __init__(self, forward: ModelForward, encode: Callable[[str], List[int]],
                 decode: Callable[[List[int]], str], eos_id: Optional[int], batch_size: int) -> None:
        self.forward, self.encode, self.decode, self.eos_id = forward, encode, decode, eos_id
        self.batch_size = batch_size

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str]) -> List[str]:
        texts: List[str] = []
        for start in range(0, len(prompts), self.batch_size):
            texts += self._batch(prompts[start:start + self.batch_size], max_new_tokens, stop)
        return texts

    def _batch(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str]) -> List[str]:
        rows = [self.forward.fit(self.encode(p), 1) for p in prompts]
        config = GenerationConfig(max_new_tokens=max_new_tokens, pad_token_id=self.forward.pad_id,
                                  eos_token_ids=() if self.eos_id is None else (self.eos_id,),
                                  stop_strings=tuple(s for s in stop if s))
        result = generate(self.forward.model, rows, config, decode=self.decode)
        return [cut_at_stop(self.decode([t for t in ids if t != self.eos_id]), stop) for ids in result.token_ids]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first occurrence of any stop string."""
    cuts = [text.index(s) for s in stop if s and s in text]
    return text[:min(cuts)] if cuts else text
