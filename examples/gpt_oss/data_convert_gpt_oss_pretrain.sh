#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the gpt-oss-20b tokenizer (o200k_harmony) into .bin/.idx: writes ./dataset/gpt_oss_text_document.bin/.idx, the DATA_PATH of pretrain_gpt_oss_*_ptd.sh.
#   bash examples/gpt_oss/data_convert_gpt_oss_pretrain.sh
#   SMOKE=1 bash examples/gpt_oss/data_convert_gpt_oss_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/gpt_oss/data_convert_gpt_oss_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-oss-20b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/gpt_oss}
WORKERS=${WORKERS:-4}

recipe_data pretrain
