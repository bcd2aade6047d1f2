#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Bamba tokenizer (ibm-ai-platform/Bamba-9B, Llama 3's, vocab 128256) into .bin/.idx: writes ./dataset/bamba_text_document.bin/.idx, the DATA_PATH of pretrain_bamba_*_ptd.sh.
#   bash examples/bamba/data_convert_bamba_pretrain.sh
#   SMOKE=1 bash examples/bamba/data_convert_bamba_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/bamba/data_convert_bamba_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Bamba-9B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/bamba}
WORKERS=${WORKERS:-4}

recipe_data pretrain
