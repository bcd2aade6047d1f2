#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Qwen3-Next tokenizer (Qwen/Qwen3-Next-80B-A3B-Instruct, vocab 151936) into .bin/.idx: writes ./dataset/qwen3_next_text_document.bin/.idx, the DATA_PATH of pretrain_qwen3_next_*_ptd.sh.
#   bash examples/qwen3_next/data_convert_qwen3_next_pretrain.sh
#   SMOKE=1 bash examples/qwen3_next/data_convert_qwen3_next_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/qwen3_next/data_convert_qwen3_next_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-Next-80B-A3B-Instruct}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/qwen3_next}
WORKERS=${WORKERS:-4}

recipe_data pretrain
