"""A key/value cache for generation, one preallocated pair of tensors per attention layer.

Every row of the batch occupies the same cache *slots* ``0 .. max_len - 1``; prompts are left-padded, so a
row's real tokens start at its first valid slot and its *positions* (what RoPE and learned position
embeddings see) count from 0 there. Layers may keep more per-token rows by name (:meth:`update_rows`: DSA's
indexer keys, DeepSeek-V4's compressor projections). Each slot records whether it holds a real token and that token's
position. A forward pass over ``sq`` new tokens (the prompt at prefill, one token per decode step) writes
their keys/values into slots ``length .. length + sq - 1`` and attends over slots ``0 .. length + sq - 1``
with the one mask rule of ``core/transformer/attention_mask.py`` applied to per-row positions (causal,
sliding windows, chunks) and the padding masked out. A padding query sees only its own slot, so its
(ignored) output stays finite. ALiBi's bias is taken over slots: per row that is the bias over positions
shifted by a constant, which the softmax ignores.

Layer entries are allocated when the layer first writes, to ``[b, heads, max_len, d]`` of the keys and
values that layer attends with: its local (TP-sharded) KV heads for standard attention, the per-head
up-projected keys/values for MLA. The model reaches the cache through ``SequenceLayout.cache``
(``GPTModel.forward(..., inference_cache=cache)``).
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch

from core.transformer.attention_mask import attention_allowed
from core.transformer.context_parallel import SequenceLayout


class KVCache:
    """Keys/values of every attention layer for ``batch`` rows of at most ``max_len`` tokens."""

    def __init__(self, batch: int, max_len: int, device: torch.device) -> None:
        self.batch, self.max_len, self.device = batch, max_len, device
        self.length = 0  # slots filled before the current step
        self.step_len = 0  # tokens of the current step
        self.valid = torch.zeros(batch, max_len, dtype=torch.bool, device=device)  # [b, max_len] real tokens
        self.positions = torch.zeros(batch, max_len, dtype=torch.long, device=device)  # [b, max_len]
        self._keys: Dict[int, torch.Tensor] = {}  # layer -> [b, heads, max_len, dk]
        self._values: Dict[int, torch.Tensor] = {}  # layer -> [b, heads, max_len, dv]
        self._masks: Dict[Tuple[Optional[int], Optional[int]], torch.Tensor] = {}
        self._rows: Dict[Tuple[int, str], torch.Tensor] = {}  # (layer, name) -> per-token rows [b, max_len, d]

    def begin_step(self, valid: torch.Tensor, positions: torch.Tensor) -> None:
        """Record the next step's tokens: ``valid`` [b, sq] (False = padding) and their ``positions`` [b, sq]."""
        sq = valid.size(1)
        if self.length + sq > self.max_len:
            raise ValueError(f"KV cache full: {self.length} + {sq} tokens exceed its {self.max_len} slots")
        self.step_len = sq
        self.valid[:, self.length:self.length + sq] = valid
        self.positions[:, self.length:self.length + sq] = positions
        self._masks = {}

    def end_step(self) -> None:
        """The current step's keys/values are now part of the cache."""
        self.length += self.step_len
        self.step_len = 0

    def layout(self, local_len: int, device: torch.device) -> SequenceLayout:
        """The model's view of the current step: its query slots and this cache."""
        if local_len != self.step_len:
            raise ValueError(f"the model got {local_len} tokens but the KV cache step has {self.step_len}")
        return SequenceLayout(self.length + local_len, self.query_slots(), cache=self)

    def query_slots(self) -> torch.Tensor:
        """The slots ``[sq]`` of the current step's tokens."""
        return torch.arange(self.length, self.length + self.step_len, device=self.device)

    def key_slots(self) -> torch.Tensor:
        """The slots ``[sk]`` attended this step (every filled one and the current step's)."""
        return torch.arange(self.length + self.step_len, device=self.device)

    def update(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Store this step's ``key`` [sq, b, n, dk] / ``value`` [sq, b, n, dv] of ``layer``; return every
        attended slot's keys and values ``[sk, b, n, dk|dv]`` (views of the cache)."""
        if layer not in self._keys:
            b, n = key.size(1), key.size(2)
            self._keys[layer] = key.new_zeros(b, n, self.max_len, key.size(3))
            self._values[layer] = value.new_zeros(b, n, self.max_len, value.size(3))
        keys, values = self._keys[layer], self._values[layer]
        end = self.length + self.step_len
        keys[:, :, self.length:end] = key.permute(1, 2, 0, 3)  # [b, n, sq, dk]
        values[:, :, self.length:end] = value.permute(1, 2, 0, 3)
        return keys[:, :, :end].permute(2, 0, 1, 3), values[:, :, :end].permute(2, 0, 1, 3)  # [sk, b, n, d]

    def update_rows(self, layer: int, name: str, rows: torch.Tensor) -> torch.Tensor:
        """Store this step's per-token ``rows`` ``[sq, b, d]`` of ``layer`` under ``name``; return every attended
        slot's ``[sk, b, d]``."""
        key = (layer, name)
        if key not in self._rows:
            self._rows[key] = rows.new_zeros(rows.size(1), self.max_len, rows.size(2))
        cached, end = self._rows[key], self.length + self.step_len
        cached[:, self.length:end] = rows.transpose(0, 1)
        return cached[:, :end].transpose(0, 1)

    def allowed(self, window: Optional[int], chunk: Optional[int]) -> torch.Tensor:
        """Boolean mask ``[b, 1, sq, sk]`` (True = attend) of the current step for a layer's window/chunk."""
        key = (window, chunk)
        if key not in self._masks:
            end = self.length + self.step_len
            query_positions = self.positions[:, self.length:end]  # [b, sq]
            allowed = attention_allowed(query_positions, self.positions[:, :end], window, chunk)  # [b, sq, sk]
            allowed = allowed & self.valid[:, None, :end]
            # causal in slots too (a later slot's position may be smaller only across padding), and a padding
            # query sees its own slot
            query_slots, key_slots = self.query_slots()[:, None], self.key_slots()[None, :]
            allowed = (allowed & (key_slots <= query_slots)) | (key_slots == query_slots)
            self._masks[key] = allowed[:, None]  # [b, 1, sq, sk]
        return self._masks[key]

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep rows ``rows`` [b] of every tensor, in that order (beam search follows its surviving beams)."""
        self.valid, self.positions = self.valid[rows], self.positions[rows]
        for layer in self._keys:
            self._keys[layer] = self._keys[layer][rows]
            self._values[layer] = self._values[layer][rows]
        for key in self._rows:
            self._rows[key] = self._rows[key][rows]

    @property
    def layers(self) -> Tuple[int, ...]:
        """The layers that have written to the cache."""
        return tuple(sorted(self._keys))
