#!/usr/bin/env bash
# Convert a FlexOlmo-7x7B-1T checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_mcore2hf.sh
#   SMOKE=1 bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/flexolmo-7x7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/FlexOlmo-7x7B-1T}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/FlexOlmo-7x7B-1T}
MODEL_TYPE_HF=flex_olmo

recipe_mcore2hf
