#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the ettin-decoder-150m tokenizer into .bin/.idx: writes ./dataset/ettin_decoder_text_document.bin/.idx, the DATA_PATH of pretrain_ettin_decoder_*_ptd.sh.
#   bash examples/modernbert_decoder/data_convert_ettin_decoder_pretrain.sh
#   SMOKE=1 bash examples/modernbert_decoder/data_convert_ettin_decoder_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/modernbert_decoder/data_convert_ettin_decoder_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ettin-decoder-150m}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/ettin_decoder}
WORKERS=${WORKERS:-4}

recipe_data pretrain
