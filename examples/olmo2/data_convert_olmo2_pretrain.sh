#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the OLMo-2-1124-7B tokenizer into .bin/.idx: writes ./dataset/olmo2_text_document.bin/.idx, the DATA_PATH of pretrain_olmo2_*_ptd.sh.
#   bash examples/olmo2/data_convert_olmo2_pretrain.sh
#   SMOKE=1 bash examples/olmo2/data_convert_olmo2_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/olmo2/data_convert_olmo2_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-2-1124-7B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/olmo2}
WORKERS=${WORKERS:-4}

recipe_data pretrain
