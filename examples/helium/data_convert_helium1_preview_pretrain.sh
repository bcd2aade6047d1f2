#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the helium-1-preview-2b tokenizer into .bin/.idx: writes ./dataset/helium1_preview_text_document.bin/.idx, the DATA_PATH of pretrain_helium1_preview_*_ptd.sh.
#   bash examples/helium/data_convert_helium1_preview_pretrain.sh
#   SMOKE=1 bash examples/helium/data_convert_helium1_preview_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/helium/data_convert_helium1_preview_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/helium-1-preview-2b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/helium1_preview}
WORKERS=${WORKERS:-4}

recipe_data pretrain
