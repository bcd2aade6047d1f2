#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the GLM-4-9B-0414 tokenizer into .bin/.idx: writes ./dataset/glm4_0414_text_document.bin/.idx, the DATA_PATH of pretrain_glm4_0414_*_ptd.sh.
#   bash examples/glm4/data_convert_glm4_0414_pretrain.sh
#   SMOKE=1 bash examples/glm4/data_convert_glm4_0414_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/glm4/data_convert_glm4_0414_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4-9B-0414}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/glm4_0414}
WORKERS=${WORKERS:-4}

recipe_data pretrain
