#!/usr/bin/env bash
# Convert a helium-1-preview-2b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/helium/ckpt_convert_helium1_preview_2b_mcore2hf.sh
#   SMOKE=1 bash examples/helium/ckpt_convert_helium1_preview_2b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/helium/ckpt_convert_helium1_preview_2b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/helium1-preview-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/helium-1-preview-2b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/helium-1-preview-2b}
MODEL_TYPE_HF=helium

recipe_mcore2hf
