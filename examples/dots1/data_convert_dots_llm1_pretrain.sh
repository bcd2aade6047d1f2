#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the dots.llm1 tokenizer into .bin/.idx: writes ./dataset/dots_llm1_text_document.bin/.idx, the DATA_PATH of pretrain_dots_llm1_*_ptd.sh.
#   bash examples/dots1/data_convert_dots_llm1_pretrain.sh
#   SMOKE=1 bash examples/dots1/data_convert_dots_llm1_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/dots1/data_convert_dots_llm1_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dots.llm1}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/dots_llm1}
WORKERS=${WORKERS:-4}

recipe_data pretrain
