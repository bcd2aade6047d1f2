#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Ling tokenizer (inclusionAI/Ling-3.0-Flash, vocab 157184) into .bin/.idx: writes ./dataset/ling_text_document.bin/.idx, the DATA_PATH of pretrain_ling_*_ptd.sh.
#   bash examples/bailing_hybrid/data_convert_ling_pretrain.sh
#   SMOKE=1 bash examples/bailing_hybrid/data_convert_ling_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/bailing_hybrid/data_convert_ling_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ling-3.0-Flash}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/ling}
WORKERS=${WORKERS:-4}

recipe_data pretrain
