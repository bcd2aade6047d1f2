"""``build_tokenizer(args)``: the tokenizer named by ``--tokenizer-type``.

Every tokenizer offers ``tokenize(text) -> ids`` (no special tokens added),
``detokenize(ids) -> text``, ``vocab_size``, ``eod``, ``pad``, ``bos`` (or
None), ``add_bos`` (whether documents conventionally start with BOS) and
``has_chat_template`` (+ ``apply_chat_template`` where True).
"""
from __future__ import annotations

import argparse
from typing import Union

from mindspeed_llm.flags import TOKENIZER_TYPES
from mindspeed_llm.tokenizer.gpt2_tokenizer import GPT2BPETokenizer
from mindspeed_llm.tokenizer.hf_tokenizer import PretrainedFromHF
from mindspeed_llm.tokenizer.null_tokenizer import NullTokenizer
from mindspeed_llm.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer

Tokenizer = Union[NullTokenizer, PretrainedFromHF, SentencePieceTokenizer, GPT2BPETokenizer]


def build_tokenizer(args: argparse.Namespace) -> Tokenizer:
    kind = getattr(args, "tokenizer_type", None)
    if kind in (None, "NullTokenizer"):
        return NullTokenizer(getattr(args, "vocab_size", None))
    if kind == "PretrainedFromHF":
        return PretrainedFromHF(getattr(args, "tokenizer_name_or_path", None),
                                trust_remote_code=getattr(args, "trust_remote_code", False))
    if kind == "SentencePieceTokenizer":
        return SentencePieceTokenizer(getattr(args, "tokenizer_model", None))
    if kind == "GPT2BPETokenizer":
        return GPT2BPETokenizer(getattr(args, "vocab_file", None), getattr(args, "merge_file", None))
    raise ValueError(f"--tokenizer-type {kind} is not one of {', '.join(TOKENIZER_TYPES)}")
