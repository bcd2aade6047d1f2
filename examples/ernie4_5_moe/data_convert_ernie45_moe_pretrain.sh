#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the ERNIE-4.5-21B-A3B tokenizer into .bin/.idx: writes ./dataset/ernie45_moe_text_document.bin/.idx, the DATA_PATH of pretrain_ernie45_moe_*_ptd.sh.
#   bash examples/ernie4_5_moe/data_convert_ernie45_moe_pretrain.sh
#   SMOKE=1 bash examples/ernie4_5_moe/data_convert_ernie45_moe_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/ernie4_5_moe/data_convert_ernie45_moe_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-21B-A3B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/ernie45_moe}
WORKERS=${WORKERS:-4}

recipe_data pretrain
