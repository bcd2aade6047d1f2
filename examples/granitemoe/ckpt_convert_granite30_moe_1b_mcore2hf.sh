#!/usr/bin/env bash
# Convert a granite-3.0-1b-a400m-base checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/granitemoe/ckpt_convert_granite30_moe_1b_mcore2hf.sh
#   SMOKE=1 bash examples/granitemoe/ckpt_convert_granite30_moe_1b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/granitemoe/ckpt_convert_granite30_moe_1b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/granite30_moe-1b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/granite-3.0-1b-a400m-base}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.0-1b-a400m-base}
MODEL_TYPE_HF=granitemoe

recipe_mcore2hf
