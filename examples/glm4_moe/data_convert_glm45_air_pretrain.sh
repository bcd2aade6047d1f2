#!/usr/bin/env bash
# Tokenize a pretraining corpus (jsonl/json/parquet/txt; the text under --json-keys) with the GLM-4.5-Air tokenizer into .bin/.idx: writes ./dataset/glm45_air_text_document.bin/.idx, the DATA_PATH of pretrain_glm45_air_*_ptd.sh.
#   bash examples/glm4_moe/data_convert_glm45_air_pretrain.sh
#   SMOKE=1 bash examples/glm4_moe/data_convert_glm45_air_pretrain.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/glm4_moe/data_convert_glm45_air_pretrain.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/enwiki/train-00000-of-00042.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.5-Air}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./dataset/glm45_air}
WORKERS=${WORKERS:-4}

recipe_data pretrain
