#!/usr/bin/env bash
# Convert a moe-7b-1b-active-shared-experts checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_mcore2hf.sh
#   SMOKE=1 bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/granite_moe_shared-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/moe-7b-1b-active-shared-experts}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/moe-7b-1b-active-shared-experts}
MODEL_TYPE_HF=granitemoeshared

recipe_mcore2hf
