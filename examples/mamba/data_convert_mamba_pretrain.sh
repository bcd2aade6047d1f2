#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with Mamba's tokenizer (GPT-NeoX-20B's, shipped in state-spaces/mamba-2.8b-hf) into .bin/.idx: writes ./dataset/mamba_text_document.bin/.idx, the DATA_PATH of pretrain_mamba_*_ptd.sh.
#   bash examples/mamba/data_convert_mamba_pretrain.sh
#   SMOKE=1 bash examples/mamba/data_convert_mamba_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/mamba/data_convert_mamba_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mamba-2.8b-hf}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/mamba}
WORKERS=${WORKERS:-4}

recipe_data pretrain
