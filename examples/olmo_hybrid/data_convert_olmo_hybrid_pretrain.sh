#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Olmo-Hybrid tokenizer (allenai/Olmo-Hybrid-7B, Dolma 2's, vocab 100352 with padding) into .bin/.idx: writes ./dataset/olmo_hybrid_text_document.bin/.idx, the DATA_PATH of pretrain_olmo_hybrid_*_ptd.sh.
#   bash examples/olmo_hybrid/data_convert_olmo_hybrid_pretrain.sh
#   SMOKE=1 bash examples/olmo_hybrid/data_convert_olmo_hybrid_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/olmo_hybrid/data_convert_olmo_hybrid_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-Hybrid-7B}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/olmo_hybrid}
WORKERS=${WORKERS:-4}

recipe_data pretrain
