#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the LFM2 tokenizer (LiquidAI/LFM2-8B-A1B, vocab 65536) into .bin/.idx: writes ./dataset/lfm2_moe_text_document.bin/.idx, the DATA_PATH of pretrain_lfm2_*_a1b_ptd.sh.
#   bash examples/lfm2_moe/data_convert_lfm2_moe_pretrain.sh
#   SMOKE=1 bash examples/lfm2_moe/data_convert_lfm2_moe_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/lfm2_moe/data_convert_lfm2_moe_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-8B-A1B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/lfm2_moe}
WORKERS=${WORKERS:-4}

recipe_data pretrain
