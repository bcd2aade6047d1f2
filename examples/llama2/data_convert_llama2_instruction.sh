#!/usr/bin/env bash
# Tokenize an Alpaca-style instruction set with the llama2 prompt template with the Llama-2-7B tokenizer into .bin/.idx: writes ./finetune_dataset/llama2/alpaca_packed_*_document.bin/.idx (input ids, attention mask, labels).
#   bash examples/llama2/data_convert_llama2_instruction.sh
#   SMOKE=1 bash examples/llama2/data_convert_llama2_instruction.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/llama2/data_convert_llama2_instruction.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/alpaca/train-00000-of-00001.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-2-7b-hf}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/llama2/alpaca}
WORKERS=${WORKERS:-4}
PROMPT_TYPE=llama2

recipe_data instruction
