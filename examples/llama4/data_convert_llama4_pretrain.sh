#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Llama-4-Scout-17B-16E tokenizer into .bin/.idx: writes ./dataset/llama4_text_document.bin/.idx, the DATA_PATH of pretrain_llama4_*_ptd.sh.
#   bash examples/llama4/data_convert_llama4_pretrain.sh
#   SMOKE=1 bash examples/llama4/data_convert_llama4_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/llama4/data_convert_llama4_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-4-Scout-17B-16E}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/llama4}
WORKERS=${WORKERS:-4}

recipe_data pretrain
