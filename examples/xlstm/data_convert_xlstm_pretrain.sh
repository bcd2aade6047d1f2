#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the xLSTM-7B tokenizer (NX-AI/xLSTM-7b, GPT-NeoX's 20B BPE, vocab 50304 with padding) into .bin/.idx: writes ./dataset/xlstm_text_document.bin/.idx, the DATA_PATH of pretrain_xlstm_*_ptd.sh.
#   bash examples/xlstm/data_convert_xlstm_pretrain.sh
#   SMOKE=1 bash examples/xlstm/data_convert_xlstm_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/xlstm/data_convert_xlstm_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xLSTM-7b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/xlstm}
WORKERS=${WORKERS:-4}

recipe_data pretrain
