#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the RWKV-4 Pile tokenizer (RWKV/rwkv-4-7b-pile, GPT-NeoX's 20B tokenizer, vocab 50277) into .bin/.idx: writes ./dataset/rwkv4_text_document.bin/.idx, the DATA_PATH of pretrain_rwkv4_*_ptd.sh.
#   bash examples/rwkv/data_convert_rwkv4_pretrain.sh
#   SMOKE=1 bash examples/rwkv/data_convert_rwkv4_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/rwkv/data_convert_rwkv4_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/rwkv-4-7b-pile}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/rwkv4}
WORKERS=${WORKERS:-4}

recipe_data pretrain
