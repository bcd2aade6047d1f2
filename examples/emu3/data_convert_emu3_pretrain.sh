#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the Emu3 text model (8B) tokenizer into .bin/.idx: writes ./dataset/emu3_text_document.bin/.idx, the DATA_PATH of pretrain_emu3_*_ptd.sh.
#   bash examples/emu3/data_convert_emu3_pretrain.sh
#   SMOKE=1 bash examples/emu3/data_convert_emu3_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/emu3/data_convert_emu3_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Emu3-Chat-text}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/emu3}
WORKERS=${WORKERS:-4}

recipe_data pretrain
