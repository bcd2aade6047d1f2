#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the bitnet-b1.58-2B-4T-bf16 tokenizer into .bin/.idx: writes ./dataset/bitnet_text_document.bin/.idx, the DATA_PATH of pretrain_bitnet_*_ptd.sh.
#   bash examples/bitnet/data_convert_bitnet_pretrain.sh
#   SMOKE=1 bash examples/bitnet/data_convert_bitnet_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/bitnet/data_convert_bitnet_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/bitnet}
WORKERS=${WORKERS:-4}

recipe_data pretrain
