#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Qwen3.5 tokenizer (Qwen/Qwen3.5-35B-A3B, embedding rows 248320) into .bin/.idx: writes ./dataset/qwen35_moe_text_document.bin/.idx, the DATA_PATH of pretrain_qwen35_*_a3b_ptd.sh.
#   bash examples/qwen3_5_moe_text/data_convert_qwen35_moe_pretrain.sh
#   SMOKE=1 bash examples/qwen3_5_moe_text/data_convert_qwen35_moe_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/qwen3_5_moe_text/data_convert_qwen35_moe_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-35B-A3B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/qwen35_moe}
WORKERS=${WORKERS:-4}

recipe_data pretrain
