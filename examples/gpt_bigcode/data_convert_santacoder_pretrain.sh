#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the gpt_bigcode-santacoder tokenizer into .bin/.idx: writes ./dataset/santacoder_text_document.bin/.idx, the DATA_PATH of pretrain_santacoder_*_ptd.sh.
#   bash examples/gpt_bigcode/data_convert_santacoder_pretrain.sh
#   SMOKE=1 bash examples/gpt_bigcode/data_convert_santacoder_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/gpt_bigcode/data_convert_santacoder_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt_bigcode-santacoder}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/santacoder}
WORKERS=${WORKERS:-4}

recipe_data pretrain
