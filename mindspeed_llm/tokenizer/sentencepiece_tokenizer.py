"""``--tokenizer-type SentencePieceTokenizer --tokenizer-model FILE.model``.

``vocab_size`` is the number of pieces; ``eod`` is the model's EOS id, ``pad``
its pad id or else ``eod``; ``bos`` its BOS id (or None). ``tokenize`` adds no
BOS/EOS, as Megatron's SentencePiece tokenizer. There is no chat template:
pick a named ``--prompt-type`` for instruction data.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence


class SentencePieceTokenizer:
    add_bos = False
    has_chat_template = False

    def __init__(self, model_file: Optional[str]) -> None:
        if not model_file:
            raise ValueError("--tokenizer-type SentencePieceTokenizer needs --tokenizer-model FILE.model")
        if not os.path.isfile(model_file):
            raise FileNotFoundError(f"--tokenizer-model {model_file}: no such file")
        import sentencepiece
        try:
            self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)
        except Exception as exc:  # sentencepiece raises RuntimeError/OSError on a file that is not a model
            raise ValueError(f"--tokenizer-model {model_file}: not a SentencePiece model "
                             f"({' '.join(str(exc).split())}); give the tokenizer.model file the model was "
                             "trained with") from None
        self.vocab_size = self.processor.get_piece_size()
        bos = self.processor.bos_id()
        self.bos: Optional[int] = bos if bos >= 0 else None

    @property
    def eod(self) -> int:
        eos = self.processor.eos_id()
        if eos < 0:
            raise ValueError("the SentencePiece model has no EOS piece (trained with eos_id=-1)")
        return eos

    @property
    def pad(self) -> int:
        pad = self.processor.pad_id()
        return pad if pad >= 0 else self.eod

    def tokenize(self, text: str) -> List[int]:
        return self.processor.encode(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.processor.decode(list(ids))
