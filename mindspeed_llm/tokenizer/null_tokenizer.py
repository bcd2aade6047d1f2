"""``--tokenizer-type NullTokenizer --vocab-size N``: ids are the text, N ids in all.

Unlike Megatron's null tokenizer, which appends an extra end-of-document id
(N + 1 ids), the vocabulary here is exactly ``--vocab-size`` and the last id,
``N - 1``, is the end-of-document token, so ``--vocab-size`` is the model's
vocabulary before padding. The text is whitespace-separated integers.
"""
from __future__ import annotations

from typing import List, Optional


class NullTokenizer:
    add_bos = False
    bos: Optional[int] = None
    has_chat_template = False

    def __init__(self, vocab_size: Optional[int]) -> None:
        if vocab_size is None or vocab_size < 2:
            raise ValueError(f"--vocab-size {vocab_size} must be at least 2 for NullTokenizer")
        self.vocab_size = vocab_size

    @property
    def eod(self) -> int:
        return self.vocab_size - 1

    @property
    def pad(self) -> int:
        return self.eod

    def tokenize(self, text: str) -> List[int]:
        ids = [int(token) for token in text.split()]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise ValueError(f"NullTokenizer: id {bad[0]} is outside [0, {self.vocab_size})")
        return ids

    def detokenize(self, ids: List[int]) -> str:
        return " ".join(str(i) for i in ids)
