#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Seed-OSS-36B-Base tokenizer into .bin/.idx: writes ./dataset/seed_oss_text_document.bin/.idx, the DATA_PATH of pretrain_seed_oss_*_ptd.sh.
#   bash examples/seed_oss/data_convert_seed_oss_pretrain.sh
#   SMOKE=1 bash examples/seed_oss/data_convert_seed_oss_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/seed_oss/data_convert_seed_oss_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Seed-OSS-36B-Base}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/seed_oss}
WORKERS=${WORKERS:-4}

recipe_data pretrain
