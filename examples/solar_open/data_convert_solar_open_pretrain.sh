#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Solar-Open-100B tokenizer into .bin/.idx: writes ./dataset/solar_open_text_document.bin/.idx, the DATA_PATH of pretrain_solar_open_*_ptd.sh.
#   bash examples/solar_open/data_convert_solar_open_pretrain.sh
#   SMOKE=1 bash examples/solar_open/data_convert_solar_open_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/solar_open/data_convert_solar_open_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Solar-Open-100B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/solar_open}
WORKERS=${WORKERS:-4}

recipe_data pretrain
