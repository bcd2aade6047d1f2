#!/usr/bin/env bash
# Tokenize an Alpaca-style preference set (instruction, input, chosen, rejected; MAP_KEYS renames other fields) with the chatml prompt template with the Qwen3-8B tokenizer into .bin/.idx: writes ./finetune_dataset/qwen3/pairwise_packed_{chosen,rejected}_{input_ids,labels}_document.bin/.idx (one item per pair; only the final reply is trained) and pairwise_packed_settings.json, the DATA_PATH of dpo_qwen3_8b_ptd.sh and orm_qwen3_8b_ptd.sh.
#   bash examples/qwen3/data_convert_qwen3_pairwise.sh
#   MAP_KEYS='{"prompt": "question"}' DATA_INPUT=./dataset/orca_rlhf.jsonl bash examples/qwen3/data_convert_qwen3_pairwise.sh   # orca_rlhf's field names
#   SMOKE=1 bash examples/qwen3/data_convert_qwen3_pairwise.sh   # a tiny preference corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/qwen3/data_convert_qwen3_pairwise.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/dpo_en/dpo_en.jsonl}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/qwen3/pairwise}
WORKERS=${WORKERS:-4}
PROMPT_TYPE=chatml

recipe_data pairwise
