#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the moe-7b-1b-active-shared-experts tokenizer into .bin/.idx: writes ./dataset/granite_moe_shared_text_document.bin/.idx, the DATA_PATH of pretrain_granite_moe_shared_*_ptd.sh.
#   bash examples/granitemoeshared/data_convert_granite_moe_shared_pretrain.sh
#   SMOKE=1 bash examples/granitemoeshared/data_convert_granite_moe_shared_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/granitemoeshared/data_convert_granite_moe_shared_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/moe-7b-1b-active-shared-experts}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/granite_moe_shared}
WORKERS=${WORKERS:-4}

recipe_data pretrain
