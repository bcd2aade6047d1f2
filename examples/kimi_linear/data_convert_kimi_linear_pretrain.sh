#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Kimi-Linear tokenizer (moonshotai/Kimi-Linear-48B-A3B-Instruct, vocab 163840; Moonshot's tiktoken tokenizer needs a directory AutoTokenizer loads) into .bin/.idx: writes ./dataset/kimi_linear_text_document.bin/.idx, the DATA_PATH of pretrain_kimi_linear_*_ptd.sh.
#   bash examples/kimi_linear/data_convert_kimi_linear_pretrain.sh
#   SMOKE=1 bash examples/kimi_linear/data_convert_kimi_linear_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/kimi_linear/data_convert_kimi_linear_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Kimi-Linear-48B-A3B-Instruct}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/kimi_linear}
WORKERS=${WORKERS:-4}

recipe_data pretrain
