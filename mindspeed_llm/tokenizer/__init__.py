"""Tokenizers: Hugging Face (``PretrainedFromHF``), SentencePiece and the null tokenizer."""
from mindspeed_llm.tokenizer.hf_tokenizer import PretrainedFromHF
from mindspeed_llm.tokenizer.null_tokenizer import NullTokenizer
from mindspeed_llm.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer
from mindspeed_llm.tokenizer.tokenizer import Tokenizer, build_tokenizer

__all__ = ["NullTokenizer", "PretrainedFromHF", "SentencePieceTokenizer", "Tokenizer", "build_tokenizer"]
