#!/usr/bin/env bash
# Tokenize an Alpaca-style instruction set with the alpaca prompt template with the Mistral-7B-v0.3 tokenizer into .bin/.idx: writes ./finetune_dataset/mistral/alpaca_packed_*_document.bin/.idx (input ids, attention mask, labels) and alpaca_packed_settings.json, the DATA_PATH of tune_mistral_7b_full_ptd.sh.
#   bash examples/mistral/data_convert_mistral_instruction.sh
#   SMOKE=1 bash examples/mistral/data_convert_mistral_instruction.sh   # a tiny corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/mistral/data_convert_mistral_instruction.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/alpaca/train-00000-of-00001.parquet}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/mistral/alpaca}
PROMPT_TYPE=${PROMPT_TYPE:-alpaca}    # plain-text markers, any tokenizer; or tokenizer: the model's own chat template
WORKERS=${WORKERS:-4}

recipe_data instruction
