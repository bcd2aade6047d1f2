#!/usr/bin/env bash
# Tokenize an Alpaca-style preference set (instruction, input, chosen, rejected; MAP_KEYS renames other fields) with the alpaca prompt template (PROMPT_TYPE) with the Mistral-7B-v0.3 tokenizer into .bin/.idx: writes ./finetune_dataset/mistral/pairwise_packed_{chosen,rejected}_{input_ids,labels}_document.bin/.idx (one item per pair; only the final reply is trained) and pairwise_packed_settings.json, the DATA_PATH of dpo_mistral_7b_ptd.sh and orm_mistral_7b_ptd.sh.
#   bash examples/mistral/data_convert_mistral_pairwise.sh
#   MAP_KEYS='{"prompt": "question"}' DATA_INPUT=./dataset/orca_rlhf.jsonl bash examples/mistral/data_convert_mistral_pairwise.sh   # orca_rlhf's field names
#   SMOKE=1 bash examples/mistral/data_convert_mistral_pairwise.sh   # a tiny preference corpus and a 300-token BPE tokenizer trained on it
#   DRY_RUN=1 bash examples/mistral/data_convert_mistral_pairwise.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

DATA_INPUT=${DATA_INPUT:-./dataset/dpo_en/dpo_en.jsonl}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}
OUTPUT_PREFIX=${OUTPUT_PREFIX:-./finetune_dataset/mistral/pairwise}
PROMPT_TYPE=${PROMPT_TYPE:-alpaca}    # plain-text markers, any tokenizer; or tokenizer: the model's own chat template
WORKERS=${WORKERS:-4}

recipe_data pairwise
