#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the c4ai-command-r7b-12-2024 tokenizer into .bin/.idx: writes ./dataset/command_r7b_text_document.bin/.idx, the DATA_PATH of pretrain_command_r7b_*_ptd.sh.
#   bash examples/cohere2/data_convert_command_r7b_pretrain.sh
#   SMOKE=1 bash examples/cohere2/data_convert_command_r7b_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/cohere2/data_convert_command_r7b_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r7b-12-2024}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/command_r7b}
WORKERS=${WORKERS:-4}

recipe_data pretrain
