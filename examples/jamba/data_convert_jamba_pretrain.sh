#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Jamba tokenizer (ai21labs/Jamba-v0.1, vocab 65536) into .bin/.idx: writes ./dataset/jamba_text_document.bin/.idx, the DATA_PATH of pretrain_jamba*_ptd.sh.
#   bash examples/jamba/data_convert_jamba_pretrain.sh
#   SMOKE=1 bash examples/jamba/data_convert_jamba_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/jamba/data_convert_jamba_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jamba-v0.1}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/jamba}
WORKERS=${WORKERS:-4}

recipe_data pretrain
