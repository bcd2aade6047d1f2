#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the HY-V3 tokenizer into .bin/.idx: writes ./dataset/hy_v3_text_document.bin/.idx, the DATA_PATH of pretrain_hy_v3_*_ptd.sh.
#   bash examples/hy_v3/data_convert_hy_v3_pretrain.sh
#   SMOKE=1 bash examples/hy_v3/data_convert_hy_v3_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/hy_v3/data_convert_hy_v3_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HY-V3}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/hy_v3}
WORKERS=${WORKERS:-4}

recipe_data pretrain
