#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Mistral-7B-v0.1 tokenizer into .bin/.idx: writes ./dataset/mistral01_text_document.bin/.idx, the DATA_PATH of pretrain_mistral01_*_ptd.sh.
#   bash examples/mistral/data_convert_mistral01_pretrain.sh
#   SMOKE=1 bash examples/mistral/data_convert_mistral01_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/mistral/data_convert_mistral01_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.1}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/mistral01}
WORKERS=${WORKERS:-4}

recipe_data pretrain
