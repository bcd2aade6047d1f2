"""Tokenizers: the null tokenizer for synthetic data (HF and SentencePiece come with the data pipeline)."""
from mindspeed_llm.tokenizer.null_tokenizer import NullTokenizer, build_tokenizer

__all__ = ["NullTokenizer", "build_tokenizer"]
