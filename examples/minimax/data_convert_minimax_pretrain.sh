#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the MiniMax-Text-01 tokenizer (MiniMaxAI/MiniMax-Text-01, vocab 200064) into .bin/.idx: writes ./dataset/minimax_text_document.bin/.idx, the DATA_PATH of pretrain_minimax_*_ptd.sh.
#   bash examples/minimax/data_convert_minimax_pretrain.sh
#   SMOKE=1 bash examples/minimax/data_convert_minimax_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/minimax/data_convert_minimax_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-Text-01}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/minimax}
WORKERS=${WORKERS:-4}

recipe_data pretrain
