"""``--tokenizer-type NullTokenizer --vocab-size N``: ids are the text, N ids in all.

Unlike Megatron's null tokenizer, which appends an extra end-of-document id
(N + 1 ids), the vocabulary here is exactly ``--vocab-size`` and the last id,
``N - 1``, is the end-of-document token, so ``--vocab-size`` is the model's
vocabulary before padding.
"""
from __future__ import annotations

import argparse
from typing import List


class NullTokenizer:
    def __init__(self, vocab_size: int) -> None:
        if vocab_size < 2:
            raise ValueError(f"--vocab-size {vocab_size} must be at least 2 for NullTokenizer")
        self.vocab_size = vocab_size

    @property
    def eod(self) -> int:
        return self.vocab_size - 1

    def tokenize(self, text: str) -> List[int]:
        return [int(token) for token in text.split()]

    def detokenize(self, ids: List[int]) -> str:
        return " ".join(str(i) for i in ids)


def build_tokenizer(args: argparse.Namespace) -> NullTokenizer:
    if args.tokenizer_type in (None, "NullTokenizer"):
        return NullTokenizer(args.vocab_size)
    raise NotImplementedError(f"--tokenizer-type {args.tokenizer_type} arrives with the data pipeline; "
                              "use --tokenizer-type NullTokenizer --vocab-size N with --mock-data")
