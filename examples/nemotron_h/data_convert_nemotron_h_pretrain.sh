#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Nemotron-H tokenizer (nvidia/Nemotron-H-8B-Base-8K, vocab 131072) into .bin/.idx: writes ./dataset/nemotron_h_text_document.bin/.idx, the DATA_PATH of pretrain_nemotron_h_*_ptd.sh.
#   bash examples/nemotron_h/data_convert_nemotron_h_pretrain.sh
#   SMOKE=1 bash examples/nemotron_h/data_convert_nemotron_h_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/nemotron_h/data_convert_nemotron_h_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-8B-Base-8K}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/nemotron_h}
WORKERS=${WORKERS:-4}

recipe_data pretrain
