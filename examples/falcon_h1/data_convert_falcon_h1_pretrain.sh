#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Falcon-H1 tokenizer (tiiuae/Falcon-H1-7B-Base, vocab 130049) into .bin/.idx: writes ./dataset/falcon_h1_text_document.bin/.idx, the DATA_PATH of pretrain_falcon_h1_*_ptd.sh.
#   bash examples/falcon_h1/data_convert_falcon_h1_pretrain.sh
#   SMOKE=1 bash examples/falcon_h1/data_convert_falcon_h1_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/falcon_h1/data_convert_falcon_h1_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Falcon-H1-7B-Base}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/falcon_h1}
WORKERS=${WORKERS:-4}

recipe_data pretrain
