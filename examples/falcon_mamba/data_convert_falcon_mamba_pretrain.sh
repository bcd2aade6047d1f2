#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with FalconMamba's tokenizer (tiiuae/falcon-mamba-7b's, 65024 tokens) into .bin/.idx: writes ./dataset/falcon_mamba_text_document.bin/.idx, the DATA_PATH of pretrain_falcon_mamba_*_ptd.sh.
#   bash examples/falcon_mamba/data_convert_falcon_mamba_pretrain.sh
#   SMOKE=1 bash examples/falcon_mamba/data_convert_falcon_mamba_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/falcon_mamba/data_convert_falcon_mamba_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-mamba-7b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/falcon_mamba}
WORKERS=${WORKERS:-4}

recipe_data pretrain
