"""Tokenizers: Hugging Face (``PretrainedFromHF``), SentencePiece, GPT-2 BPE files and the null tokenizer."""
from mindspeed_llm.tokenizer.gpt2_tokenizer import GPT2BPETokenizer
from mindspeed_llm.tokenizer.hf_tokenizer import PretrainedFromHF
from mindspeed_llm.tokenizer.null_tokenizer import NullTokenizer
from mindspeed_llm.tokenizer.sentencepiece_tokenizer import SentencePieceTokenizer
from mindspeed_llm.tokenizer.tokenizer import Tokenizer, TokenizerError, build_tokenizer

__all__ = ["GPT2BPETokenizer", "NullTokenizer", "PretrainedFromHF", "SentencePieceTokenizer", "Tokenizer",
           "TokenizerError", "build_tokenizer"]
