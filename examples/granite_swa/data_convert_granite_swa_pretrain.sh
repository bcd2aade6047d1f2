#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the granite-swash-2b tokenizer into .bin/.idx: writes ./dataset/granite_swa_text_document.bin/.idx, the DATA_PATH of pretrain_granite_swa_*_ptd.sh.
#   bash examples/granite_swa/data_convert_granite_swa_pretrain.sh
#   SMOKE=1 bash examples/granite_swa/data_convert_granite_swa_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/granite_swa/data_convert_granite_swa_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-swash-2b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/granite_swa}
WORKERS=${WORKERS:-4}

recipe_data pretrain
