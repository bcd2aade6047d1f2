#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Zamba tokenizer (Zyphra/Zamba-7B-v1, Mistral v0.1's, vocab 32000) into .bin/.idx: writes ./dataset/zamba_text_document.bin/.idx, the DATA_PATH of pretrain_zamba_*_ptd.sh.
#   bash examples/zamba/data_convert_zamba_pretrain.sh
#   SMOKE=1 bash examples/zamba/data_convert_zamba_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/zamba/data_convert_zamba_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba-7B-v1}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/zamba}
WORKERS=${WORKERS:-4}

recipe_data pretrain
