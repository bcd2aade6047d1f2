"""``--tokenizer-type PretrainedFromHF --tokenizer-name-or-path DIR``: a Hugging Face tokenizer.

Loads ``transformers.AutoTokenizer.from_pretrained(DIR)`` from a local
directory (or, failing that, the local Hugging Face cache; nothing is
downloaded). ``vocab_size`` is ``len(tokenizer)`` (base vocabulary plus added
tokens), ``eod`` the EOS id, ``pad`` the pad id or else ``eod``.
``tokenize`` adds no special tokens; ``add_bos`` says whether the tokenizer's
own ``__call__`` would prepend BOS (Llama does), which the pretraining handler
honours. ``tokenize_batch`` is ``tokenize`` over many texts in one call; with
the fast (Rust) backend that call runs without the GIL (``releases_gil``), so
Python threads tokenize batches in parallel (``preprocess_data.py --workers``).

:class:`HFTokenizer` is that interface over any ``transformers`` tokenizer
object; ``GPT2BPETokenizer`` (gpt2_tokenizer.py) builds on it too.
"""
from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence


class HFTokenizer:
    """Our tokenizer interface over a ``transformers`` tokenizer object."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        # the Rust backend encodes ~2x faster than the Python wrapper's __call__
        self._backend = getattr(self.tokenizer, "_tokenizer", None) if self.tokenizer.is_fast else None
        # the same ids as encode_batch for ~35% less CPU: it skips the tokens' character offsets (tokenizers>=0.21)
        self._encode_batch = getattr(self._backend, "encode_batch_fast", None) or \
            getattr(self._backend, "encode_batch", None)
        self.vocab_size = len(self.tokenizer)
        self.bos: Optional[int] = self.tokenizer.bos_token_id
        self.add_bos = self._prepends_bos()

    @property
    def eod(self) -> int:
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError("the Hugging Face tokenizer has no eos_token: set one in tokenizer_config.json "
                             "(needed for --append-eod and instruction data)")
        return eos

    @property
    def pad(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.eod

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def tokenize(self, text: str) -> List[int]:
        if self._backend is not None:
            return self._backend.encode(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False)

    @property
    def releases_gil(self) -> bool:
        """Whether :meth:`tokenize_batch` runs without holding the GIL (the fast Rust backend)."""
        return self._backend is not None

    def tokenize_batch(self, texts: List[str]) -> List[List[int]]:
        """``[tokenize(text) for text in texts]`` in one backend call (``encode_batch_fast``, which skips the
        character offsets). The fast backend encodes with the GIL released: on the calling thread when
        ``TOKENIZERS_PARALLELISM`` is false, else on its Rayon pool."""
        if self._backend is not None:
            return [encoding.ids for encoding in self._encode_batch(texts, add_special_tokens=False)]
        return [self.tokenize(text) for text in texts]

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))

    def apply_chat_template(self, messages: List[Dict[str, str]], add_generation_prompt: bool = False) -> str:
        """The conversation rendered as text by the tokenizer's own Jinja chat template."""
        if not self.has_chat_template:
            raise ValueError("the Hugging Face tokenizer has no chat_template; choose a named --prompt-type")
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    def _prepends_bos(self) -> bool:
        if self.bos is None:
            return False
        ids = self.tokenizer("a", add_special_tokens=True)["input_ids"]
        return len(ids) > 0 and ids[0] == self.bos


# a Hugging Face tokenizer directory holds at least one of these
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "sentencepiece.bpe.model")


class PretrainedFromHF(HFTokenizer):
    """``transformers.AutoTokenizer`` from a local directory (or the local Hugging Face cache)."""

    def __init__(self, name_or_path: Optional[str], trust_remote_code: bool = False) -> None:
        super().__init__(_load_auto_tokenizer(name_or_path, trust_remote_code))


def _load_auto_tokenizer(name_or_path: Optional[str], trust_remote_code: bool):
    if not name_or_path:
        raise ValueError("--tokenizer-type PretrainedFromHF needs --tokenizer-name-or-path DIR")
    from transformers import AutoTokenizer
    if os.path.isdir(name_or_path):
        if not any(os.path.isfile(os.path.join(name_or_path, name)) for name in TOKENIZER_FILES):
            raise FileNotFoundError(f"--tokenizer-name-or-path {name_or_path}: the directory holds none of "
                                    f"{', '.join(TOKENIZER_FILES[:4])} (a Hugging Face tokenizer's files); give the "
                                    "model's (or tokenizer's) directory")
        try:
            return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
        except Exception as exc:  # transformers raises many types (ValueError, OSError, JSON, tokenizers errors)
            raise ValueError(f"--tokenizer-name-or-path {name_or_path}: transformers cannot load this tokenizer "
                             f"({' '.join(str(exc).split())[:300]}); check its files, or give another "
                             "directory") from None
    if os.path.exists(name_or_path):
        raise FileNotFoundError(f"--tokenizer-name-or-path {name_or_path}: not a directory (expected a "
                                "folder with tokenizer.json / tokenizer_config.json)")
    try:
        return AutoTokenizer.from_pretrained(name_or_path, local_files_only=True,
                                             trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"--tokenizer-name-or-path {name_or_path}: no such directory, and not in "
                                "the local Hugging Face cache (nothing is downloaded); give the directory of a "
                                "Hugging Face tokenizer") from exc
