#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the ERNIE-4.5-0.3B-Base-PT tokenizer into .bin/.idx: writes ./dataset/ernie4_5_text_document.bin/.idx, the DATA_PATH of pretrain_ernie4_5_*_ptd.sh.
#   bash examples/ernie4_5/data_convert_ernie4_5_pretrain.sh
#   SMOKE=1 bash examples/ernie4_5/data_convert_ernie4_5_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/ernie4_5/data_convert_ernie4_5_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/ernie4_5}
WORKERS=${WORKERS:-4}

recipe_data pretrain
