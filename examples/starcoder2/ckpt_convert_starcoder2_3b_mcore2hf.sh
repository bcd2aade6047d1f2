#!/usr/bin/env bash
# Convert a starcoder2-3b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/starcoder2/ckpt_convert_starcoder2_3b_mcore2hf.sh
#   SMOKE=1 bash examples/starcoder2/ckpt_convert_starcoder2_3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/starcoder2/ckpt_convert_starcoder2_3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/starcoder2-3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/starcoder2-3b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/starcoder2-3b}
MODEL_TYPE_HF=starcoder2

recipe_mcore2hf
