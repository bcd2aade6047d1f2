#!/usr/bin/env bash
# Tokenize an Alpaca-style instruction set with the chatml prompt template with the Qwen3-8B tokenizer into .bin/.idx: writes ./finetune_dataset/qwen3/alpaca_packed_*_document.bin/.idx (input ids, attention mask, labels).
#   bash examples/qwen3/data_convert_qwen3_instruction.sh
#   SMOKE=1 bash examples/qwen3/data_convert_qwen3_instruction.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/qwen3/data_convert_qwen3_instruction.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/alpaca/train-00000-of-00001.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/qwen3/alpaca}
WORKERS=${WORKERS:-4}
PROMPT_TYPE=chatml

recipe_data instruction
