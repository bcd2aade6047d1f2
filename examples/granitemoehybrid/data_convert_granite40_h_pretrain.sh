#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Granite-4.0 tokenizer (ibm-granite/granite-4.0-h-350m, vocab 100352) into .bin/.idx: writes ./dataset/granite40_h_text_document.bin/.idx, the DATA_PATH of pretrain_granite40_h_*_ptd.sh.
#   bash examples/granitemoehybrid/data_convert_granite40_h_pretrain.sh
#   SMOKE=1 bash examples/granitemoehybrid/data_convert_granite40_h_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/granitemoehybrid/data_convert_granite40_h_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-4.0-h-350m}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/granite40_h}
WORKERS=${WORKERS:-4}

recipe_data pretrain
