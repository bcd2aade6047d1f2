#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the gpt-j-6b tokenizer into .bin/.idx: writes ./dataset/gptj_text_document.bin/.idx, the DATA_PATH of pretrain_gptj_*_ptd.sh.
#   bash examples/gptj/data_convert_gptj_pretrain.sh
#   SMOKE=1 bash examples/gptj/data_convert_gptj_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/gptj/data_convert_gptj_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-j-6b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/gptj}
WORKERS=${WORKERS:-4}

recipe_data pretrain
