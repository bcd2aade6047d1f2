#!/usr/bin/env bash
# Tokenize an Alpaca-style preference set (instruction, input, chosen, rejected; MAP_KEYS renames other fields) with the llama3 prompt template with the Llama-3.1-8B tokenizer into .bin/.idx: writes ./finetune_dataset/llama31/pairwise_packed_{chosen,rejected}_{input_ids,labels}_document.bin/.idx (one item per pair; only the final reply is trained) and pairwise_packed_settings.json, the DATA_PATH of dpo_llama31_8b_ptd.sh and orm_llama31_8b_ptd.sh.
#   bash examples/llama3/data_convert_llama31_pairwise.sh
#   MAP_KEYS='{"prompt": "question"}' DATA_INPUT=./dataset/orca_rlhf.jsonl bash examples/llama3/data_convert_llama31_pairwise.sh   # orca_rlhf's field names
#   SMOKE=1 bash examples/llama3/data_convert_llama31_pairwise.sh   # a tiny preference corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/llama3/data_convert_llama31_pairwise.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/dpo_en/dpo_en.jsonl}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/llama31/pairwise}
WORKERS=${WORKERS:-4}
PROMPT_TYPE=llama3

recipe_data pairwise
