#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the EXAONE-4.0-32B tokenizer into .bin/.idx: writes ./dataset/exaone4_text_document.bin/.idx, the DATA_PATH of pretrain_exaone4_*_ptd.sh.
#   bash examples/exaone4/data_convert_exaone4_pretrain.sh
#   SMOKE=1 bash examples/exaone4/data_convert_exaone4_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/exaone4/data_convert_exaone4_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/EXAONE-4.0-32B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/exaone4}
WORKERS=${WORKERS:-4}

recipe_data pretrain
