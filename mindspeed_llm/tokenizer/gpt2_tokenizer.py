"""``--tokenizer-type GPT2BPETokenizer --vocab-file vocab.json --merge-file merges.txt``.

Megatron's GPT-2 byte-level BPE from the original two files, built with the
``tokenizers`` library and wrapped as a ``transformers`` fast tokenizer (nothing
is downloaded). ``eod`` is the id of ``<|endoftext|>``, which also serves as
``pad`` and ``bos``; as Megatron's, ``tokenize`` adds no special tokens and
documents start without BOS. ``vocab_size`` counts the vocabulary plus
``<|endoftext|>`` if the file lacks it.
"""
from __future__ import annotations

import os
from typing import Optional

from mindspeed_llm.tokenizer.hf_tokenizer import HFTokenizer

END_OF_TEXT = "<|endoftext|>"


class GPT2BPETokenizer(HFTokenizer):
    """GPT-2 BPE from ``vocab.json`` and ``merges.txt`` (Megatron's ``--vocab-file``/``--merge-file``)."""

    def __init__(self, vocab_file: Optional[str], merge_file: Optional[str]) -> None:
        for flag, path in (("--vocab-file", vocab_file), ("--merge-file", merge_file)):
            if not path:
                raise ValueError(f"--tokenizer-type GPT2BPETokenizer needs {flag}")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{flag} {path}: no such file")
        try:
            tokenizer = _byte_level_bpe(vocab_file, merge_file)
        except Exception as exc:  # the tokenizers library raises its own error types on malformed files
            raise ValueError(f"--vocab-file {vocab_file} / --merge-file {merge_file}: not a GPT-2 BPE vocabulary "
                             f"and merge list ({' '.join(str(exc).split())})") from None
        super().__init__(tokenizer)
        self.add_bos = False


def _byte_level_bpe(vocab_file: str, merge_file: str):
    """GPT-2's pipeline: byte-level pre-tokenization, BPE with the merges, byte-level decoding."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE.from_file(vocab_file, merge_file))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=END_OF_TEXT, bos_token=END_OF_TEXT,
                                   unk_token=END_OF_TEXT)
