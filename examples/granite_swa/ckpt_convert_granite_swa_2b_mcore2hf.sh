#!/usr/bin/env bash
# Convert a granite-swash-2b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/granite_swa/ckpt_convert_granite_swa_2b_mcore2hf.sh
#   SMOKE=1 bash examples/granite_swa/ckpt_convert_granite_swa_2b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/granite_swa/ckpt_convert_granite_swa_2b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/granite_swa-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/granite-swash-2b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-swash-2b}
MODEL_TYPE_HF=granite_swa

recipe_mcore2hf
