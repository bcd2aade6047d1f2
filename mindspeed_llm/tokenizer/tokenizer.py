"""``build_tokenizer(args)``: the tokenizer named by ``--tokenizer-type``.

Every tokenizer offers ``tokenize(text) -> ids`` (no special tokens added),
``detokenize(ids) -> text``, ``vocab_size``, ``eod``, ``pad``, ``bos`` (or
None), ``add_bos`` (whether documents conventionally start with BOS) and
``has_chat_template`` (+ ``apply_chat_template`` where True).
"""
from __future__ import annotations

import argparse
from typing import Union

from mindspeed_llm.flags import TOKENIZER_TYPES, ArgumentError
from mindspeed_llm.tokenizer.gpt2_tokenizer import GPT2BPETokenizer
from mindspeed_llm.tokenizer.hf_tokenizer import PretrainedFromHF
from mindspeed_llm.tokenizer.null_tokenizer import NullTokenizer
from mindspeed_llm.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer

Tokenizer = Union[NullTokenizer, PretrainedFromHF, SentencePieceTokenizer, GPT2BPETokenizer]


class TokenizerError(ArgumentError):
    """The tokenizer the flags name cannot be built (a missing, empty or unreadable file or directory): one line
    naming the flag and the fix. An ArgumentError, so an entry point prints it and exits 2."""


def build_tokenizer(args: argparse.Namespace) -> Tokenizer:
    """The tokenizer of ``--tokenizer-type``; TokenizerError (one line) when its files cannot be read."""
    try:
        return _build(args)
    except (ValueError, OSError) as error:  # the tokenizers' own errors name the flag and the file
        raise TokenizerError(one_line(error)) from None


def one_line(error: BaseException, limit: int = 400) -> str:
    """``error``'s message on one line (libraries' messages span several), at most ``limit`` characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _build(args: argparse.Namespace) -> Tokenizer:
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
