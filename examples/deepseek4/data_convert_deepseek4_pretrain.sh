#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the DeepSeek-V4 tokenizer into .bin/.idx: writes ./dataset/deepseek4_text_document.bin/.idx, the DATA_PATH of pretrain_deepseek4_*_ptd.sh.
#   bash examples/deepseek4/data_convert_deepseek4_pretrain.sh
#   SMOKE=1 bash examples/deepseek4/data_convert_deepseek4_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/deepseek4/data_convert_deepseek4_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V4-Flash-Base}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/deepseek4}
WORKERS=${WORKERS:-4}

recipe_data pretrain
