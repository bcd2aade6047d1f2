#!/usr/bin/env bash
# Convert a OLMoE-1B-7B-0924 checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/olmoe/ckpt_convert_olmoe_1b_7b_mcore2hf.sh
#   SMOKE=1 bash examples/olmoe/ckpt_convert_olmoe_1b_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/olmoe/ckpt_convert_olmoe_1b_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/olmoe-1b-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/OLMoE-1B-7B-0924}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMoE-1B-7B-0924}
MODEL_TYPE_HF=olmoe

recipe_mcore2hf
