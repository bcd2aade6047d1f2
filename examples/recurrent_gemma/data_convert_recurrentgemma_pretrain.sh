#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the RecurrentGemma tokenizer (google/recurrentgemma-2b, Gemma's SentencePiece, vocab 256000) into .bin/.idx: writes ./dataset/recurrentgemma_text_document.bin/.idx, the DATA_PATH of pretrain_recurrentgemma_*_ptd.sh.
#   bash examples/recurrent_gemma/data_convert_recurrentgemma_pretrain.sh
#   SMOKE=1 bash examples/recurrent_gemma/data_convert_recurrentgemma_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/recurrent_gemma/data_convert_recurrentgemma_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/recurrentgemma-2b}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/recurrentgemma}
WORKERS=${WORKERS:-4}

recipe_data pretrain
