#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with Mamba2's tokenizer (EleutherAI/gpt-neox-20b) into .bin/.idx: writes ./dataset/mamba2_text_document.bin/.idx, the DATA_PATH of pretrain_mamba2_*_ptd.sh.
#   bash examples/mamba2/data_convert_mamba2_pretrain.sh
#   SMOKE=1 bash examples/mamba2/data_convert_mamba2_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/mamba2/data_convert_mamba2_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neox-20b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/mamba2}
WORKERS=${WORKERS:-4}

recipe_data pretrain
