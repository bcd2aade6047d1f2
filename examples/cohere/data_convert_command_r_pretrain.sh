#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the c4ai-command-r-v01 tokenizer into .bin/.idx: writes ./dataset/command_r_text_document.bin/.idx, the DATA_PATH of pretrain_command_r_*_ptd.sh.
#   bash examples/cohere/data_convert_command_r_pretrain.sh
#   SMOKE=1 bash examples/cohere/data_convert_command_r_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/cohere/data_convert_command_r_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r-v01}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/command_r}
WORKERS=${WORKERS:-4}

recipe_data pretrain
