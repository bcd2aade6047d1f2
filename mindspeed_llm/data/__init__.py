"""Data preprocessing: prompt templates and handlers (used by ``tools/preprocess_data.py``)."""
from mindspeed_llm.data.handlers import (HANDLERS, AlpacaStyleInstructionHandler, AlpacaStylePairwiseHandler,
                                         BadRecord, GeneralPretrainHandler, SharegptStyleInstructionHandler,
                                         SharegptStylePairwiseHandler, build_emitter, build_handler,
                                         greedy_pack, output_files)
from mindspeed_llm.data.templates import IGNORE_INDEX, PROMPT_TYPES, TEMPLATES, ChatEncoder, Template

__all__ = ["HANDLERS", "AlpacaStyleInstructionHandler", "AlpacaStylePairwiseHandler", "BadRecord",
           "GeneralPretrainHandler", "SharegptStyleInstructionHandler", "SharegptStylePairwiseHandler",
           "build_emitter", "build_handler", "greedy_pack", "output_files", "IGNORE_INDEX", "PROMPT_TYPES",
           "TEMPLATES", "ChatEncoder", "Template"]
