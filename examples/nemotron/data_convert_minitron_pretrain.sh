#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Minitron-4B-Base tokenizer into .bin/.idx: writes ./dataset/minitron_text_document.bin/.idx, the DATA_PATH of pretrain_minitron_*_ptd.sh.
#   bash examples/nemotron/data_convert_minitron_pretrain.sh
#   SMOKE=1 bash examples/nemotron/data_convert_minitron_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/nemotron/data_convert_minitron_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Minitron-4B-Base}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/minitron}
WORKERS=${WORKERS:-4}

recipe_data pretrain
