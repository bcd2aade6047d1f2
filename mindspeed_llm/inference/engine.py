"""Autoregressive generation from a :class:`~core.models.gpt_model.GPTModel` (one pipeline stage, any TP).

Prompts of different lengths are left-padded into one batch; each row's positions start at 0 at its
first real token and padding is masked out of attention (``kv_cache.py``). The prompt runs once (prefill),
then every step feeds only the new token of each row, attending over the cached keys/values.

Models with layers that keep no KV cache yet, layers whose token mixer is recurrent (Mamba, the gated
DeltaNet, short convolutions: their convolution and recurrent state are not cached) and MoE layers that drop tokens over a capacity
(``--moe-expert-capacity-factor``: the choice depends on every token of the pass), fall back to
recomputing each row's whole sequence, unpadded, at every step: slower, with the same result.

Every rank runs the same loop on the same full-vocabulary logits and draws the same token (the generator
is seeded alike on every rank): the logits are gathered over TP, and under pipeline parallelism each stage
runs its layers (with its layers' part of the cache) and sends its activations to the next; the last stage
broadcasts the next-token logits to every stage. Context parallelism and virtual pipeline chunks are refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

import torch

import torch.distributed as dist

from core.models.gpt_model import GPTModel, gather_logits
from core.pipeline_parallel import p2p
from core.transformer.config import ATTENTION_MIXER
from mindspeed_llm.inference.kv_cache import KVCache
from mindspeed_llm.inference.sampling import SamplingConfig, next_tokens

# streaming: called after every step with the token chosen for each row and whether the row was still active
TokenCallback = Callable[[List[int], List[bool]], None]


@dataclass(frozen=True)
class GenerationConfig:
    """What to generate: ``--max-new-tokens``, the sampling rule, and when a row stops."""

    max_new_tokens: int = 32
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    eos_token_ids: Tuple[int, ...] = ()
    stop_strings: Tuple[str, ...] = ()
    pad_token_id: int = 0
    seed: int = 1234
    row_seeds: Optional[Tuple[int, ...]] = None  # one sampling seed per prompt (instead of ``seed`` for the batch)

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens {self.max_new_tokens} must be >= 1")


@dataclass
class Generation:
    """The generated ids of each row (the eos token included when a row ends on one), why each row stopped
    (``eos``, ``stop`` (a stop string), ``length``), and with ``keep_logits`` each step's raw logits [b, v]."""

    token_ids: List[List[int]]
    finish_reasons: List[str]
    step_logits: List[torch.Tensor] = field(default_factory=list)


def needs_recompute(model: GPTModel) -> bool:
    """Whether ``model`` has layers that cannot decode from the KV cache (see the module docstring)."""
    config = model.config  # the whole model's layers, so every pipeline stage decides alike
    recurrent = bool(config.layer_mixers - {ATTENTION_MIXER, None})
    return recurrent or getattr(model.config, "moe_expert_capacity_factor", None) is not None


def check_supported(model: GPTModel) -> None:
    """Refuse layouts the engine does not run (one line each)."""
    if model.context_parallel is not None:
        raise ValueError("generation does not split prompts over CP ranks: use --context-parallel-size 1")
    if model.config.sequence_parallel and model.tp_group.size > 1:
        raise ValueError("generation decodes one token per step: build the model without --sequence-parallel")
    if model.value_head is not None:
        raise ValueError("a reward model (value head) scores sequences, it does not generate")


def model_device(model: GPTModel) -> torch.device:
    """The device of the model's (this stage's) parameters."""
    return next(model.parameters()).device


def check_prompts(prompts: Sequence[Sequence[int]], context: int) -> None:
    """Some prompts, every one non-empty and no longer than the model's context (one-line errors)."""
    if len(prompts) == 0:
        raise ValueError("no prompts to generate from")
    for i, prompt in enumerate(prompts):
        if len(prompt) == 0:
            raise ValueError(f"prompt {i} is empty")
        if len(prompt) > context:
            raise ValueError(f"prompt {i} has {len(prompt)} tokens, more than the model's context of {context} "
                             f"(--max-position-embeddings); shorten it")


class _Stopping:
    """Per-row finished flags: EOS ids, stop strings (on the decoded generated text) and the length limit."""

    def __init__(self, batch: int, config: GenerationConfig,
                 decode: Optional[Callable[[List[int]], str]]) -> None:
        if config.stop_strings and decode is None:
            raise ValueError("stop strings need a tokenizer to decode the generated ids")
        self.config, self.decode = config, decode
        self.reasons: List[Optional[str]] = [None] * batch

    def active(self) -> List[bool]:
        return [reason is None for reason in self.reasons]

    def update(self, row: int, generated: List[int]) -> None:
        if generated[-1] in self.config.eos_token_ids:
            self.reasons[row] = "eos"
        elif self.config.stop_strings and any(s in self.decode(generated) for s in self.config.stop_strings):
            self.reasons[row] = "stop"

    def finish(self) -> List[str]:
        return [reason or "length" for reason in self.reasons]


def left_pad(prompts: Sequence[Sequence[int]], pad: int,
             device: torch.device) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens ``[b, P]``, valid flags ``[b, P]`` and per-row positions ``[b, P]`` of left-padded prompts."""
    longest = max(len(p) for p in prompts)
    tokens = torch.full((len(prompts), longest), pad, dtype=torch.long)
    valid = torch.zeros(len(prompts), longest, dtype=torch.bool)
    for row, prompt in enumerate(prompts):
        tokens[row, longest - len(prompt):] = torch.tensor(list(prompt), dtype=torch.long)
        valid[row, longest - len(prompt):] = True
    positions = (torch.cumsum(valid.long(), dim=1) - 1).clamp(min=0)  # [b, P]
    return tokens.to(device), valid.to(device), positions.to(device)


def seen_tokens(prompts: Sequence[Sequence[int]], vocab: int, device: torch.device) -> torch.Tensor:
    """``[b, v]`` bool: the tokens of each prompt (the repetition penalty's set)."""
    seen = torch.zeros(len(prompts), vocab, dtype=torch.bool, device=device)
    for row, prompt in enumerate(prompts):
        seen[row, torch.tensor(list(prompt), dtype=torch.long, device=device)] = True
    return seen


class _Stages:
    """One forward pass of the whole model (over the pipeline stages); every rank gets the logits of each
    row's last token ``[b, v]`` (fp32)."""

    def __init__(self, model: GPTModel) -> None:
        self.model, self.pp = model, model.state.pp_group

    def __call__(self, ids: torch.Tensor, **kwargs: object) -> torch.Tensor:
        model, pp = self.model, self.pp
        batch, length = ids.shape
        dtype = torch.float32 if model.config.fp32_residual_connection else model.config.params_dtype  # the stream's
        hidden = None
        if not model.pre_process:  # the previous stage's activations [s, b, h]
            shape = (length, batch, model.config.pipeline_hidden_width)
            hidden = p2p.communicate([p2p.recv(pp.ranks[pp.rank - 1], shape)], pp, dtype, ids.device)[0]
        out = model(ids if model.pre_process else None, hidden_states=hidden, **kwargs)
        if model.post_process:
            logits = gather_logits(out[:, -1:], model)[:, 0].float().contiguous()  # [b, v]
        else:
            p2p.communicate([p2p.send(out.to(dtype), pp.ranks[pp.rank + 1])], pp, dtype, ids.device)
            logits = torch.empty(batch, model.config.vocab_size, dtype=torch.float32, device=ids.device)
        if pp.size > 1:
            dist.broadcast(logits, src=pp.ranks[-1], group=pp.handle)
            p2p.wait_sends()
        return logits


class _CachedDecoder:
    """Next-token logits ``[b, v]`` from a prefill and then one token per row per step."""

    def __init__(self, model: GPTModel, prompts: Sequence[Sequence[int]], max_new: int, pad: int,
                 device: torch.device) -> None:
        self.forward = _Stages(model)
        tokens, valid, positions = left_pad(prompts, pad, device)
        self.cache = KVCache(len(prompts), tokens.size(1) + max_new, device)
        self.next_position = positions[:, -1] + 1  # [b]
        self.first = (tokens, valid, positions)

    def prefill(self) -> torch.Tensor:
        return self._run(*self.first)

    def step(self, tokens: List[int], active: List[bool]) -> torch.Tensor:
        device = self.next_position.device
        ids = torch.tensor(tokens, dtype=torch.long, device=device)[:, None]  # [b, 1]
        valid = torch.tensor(active, dtype=torch.bool, device=device)[:, None]
        positions = self.next_position[:, None]
        self.next_position = self.next_position + 1
        return self._run(ids, valid, positions)

    def select_rows(self, rows: List[int]) -> None:
        """Continue from rows ``rows`` (beam search's surviving beams)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.next_position.device)
        self.cache.select_rows(index)
        self.next_position = self.next_position[index]

    def _run(self, ids: torch.Tensor, valid: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.cache.begin_step(valid, positions)
        logits = self.forward(ids, position_ids=positions, inference_cache=self.cache)  # [b, v]
        self.cache.end_step()
        return logits


class _RecomputingDecoder:
    """Next-token logits ``[b, v]`` from each row's whole sequence, unpadded, at every step."""

    def __init__(self, model: GPTModel, prompts: Sequence[Sequence[int]], device: torch.device) -> None:
        self.forward, self.device = _Stages(model), device
        self.sequences = [list(p) for p in prompts]
        self.vocab = model.config.vocab_size

    def prefill(self) -> torch.Tensor:
        return torch.cat([self._last_logits(seq) for seq in self.sequences])

    def step(self, tokens: List[int], active: List[bool]) -> torch.Tensor:
        rows = []
        for row, (token, is_active) in enumerate(zip(tokens, active)):
            if is_active:
                self.sequences[row].append(token)
                rows.append(self._last_logits(self.sequences[row]))
            else:  # a finished row: its logits are not used
                rows.append(torch.zeros(1, self.vocab, device=self.device))
        return torch.cat(rows)

    def select_rows(self, rows: List[int]) -> None:
        """Continue from rows ``rows`` (beam search's surviving beams)."""
        self.sequences = [list(self.sequences[row]) for row in rows]

    def _last_logits(self, sequence: List[int]) -> torch.Tensor:
        ids = torch.tensor([sequence], dtype=torch.long, device=self.device)  # [1, s]
        return self.forward(ids)  # [1, v]


def build_decoder(model: GPTModel, prompts: Sequence[Sequence[int]], max_new: int, pad: int,
                  use_cache: Optional[bool]):
    """The KV-cache decoder, or the recomputing one (``use_cache`` False, or None for a model that needs it)."""
    check_supported(model)
    check_prompts(prompts, model.config.max_position_embeddings)
    model.eval()
    device = model_device(model)
    cached = not needs_recompute(model) if use_cache is None else use_cache
    return (_CachedDecoder(model, prompts, max_new, pad, device) if cached
            else _RecomputingDecoder(model, prompts, device))


def new_token_budget(model: GPTModel, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> int:
    """``max_new_tokens``, or fewer when the longest prompt would run past the model's context."""
    return min(max_new_tokens, model.config.max_position_embeddings - max(len(p) for p in prompts))


def row_generators(seeds: Sequence[int], rows: int) -> List[torch.Generator]:
    """One seeded generator per row (``GenerationConfig.row_seeds``)."""
    if len(seeds) != rows:
        raise ValueError(f"{len(seeds)} row seeds for {rows} prompts")
    return [torch.Generator().manual_seed(int(seed)) for seed in seeds]


@torch.no_grad()
def generate(model: GPTModel, prompts: Sequence[Sequence[int]], config: GenerationConfig, *,
             decode: Optional[Callable[[List[int]], str]] = None, on_tokens: Optional[TokenCallback] = None,
             use_cache: Optional[bool] = None, keep_logits: bool = False) -> Generation:
    """Generate up to ``config.max_new_tokens`` tokens after each prompt (token ids, any lengths).

    ``decode``: ids -> text, needed for stop strings. ``use_cache`` None: the KV cache unless the model needs
    recomputation (False forces recomputation, the reference the cache is tested against).
    """
    check_prompts(prompts, model.config.max_position_embeddings)
    max_new = new_token_budget(model, prompts, config.max_new_tokens)
    decoder = build_decoder(model, prompts, max_new, config.pad_token_id, use_cache)
    device = model_device(model)
    generator = (torch.Generator().manual_seed(config.seed) if config.row_seeds is None
                 else row_generators(config.row_seeds, len(prompts)))
    seen = seen_tokens(prompts, model.config.vocab_size, device)
    stopping = _Stopping(len(prompts), config, decode)
    generated: List[List[int]] = [[] for _ in prompts]
    step_logits: List[torch.Tensor] = []
    logits = decoder.prefill()  # [b, v]
    for step in range(max_new):
        if keep_logits:
            step_logits.append(logits)
        chosen, _ = next_tokens(logits, seen, config.sampling, generator)  # [b]
        active = stopping.active()
        tokens = [int(t) if a else config.pad_token_id for t, a in zip(chosen.tolist(), active)]
        for row, (token, is_active) in enumerate(zip(tokens, active)):
            if is_active:
                generated[row].append(token)
                seen[row, token] = True
                stopping.update(row, generated[row])
        if on_tokens is not None:
            on_tokens(tokens, active)
        if not any(stopping.active()) or step == max_new - 1:
            break
        logits = decoder.step(tokens, active)
    return Generation(generated, stopping.finish(), step_logits)
