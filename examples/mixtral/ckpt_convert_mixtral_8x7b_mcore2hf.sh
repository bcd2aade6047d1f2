#!/usr/bin/env bash
# Convert a Mixtral-8x7B-v0.1 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/mixtral/ckpt_convert_mixtral_8x7b_mcore2hf.sh
#   SMOKE=1 bash examples/mixtral/ckpt_convert_mixtral_8x7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/mixtral/ckpt_convert_mixtral_8x7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/mixtral-8x7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Mixtral-8x7B-v0.1}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mixtral-8x7B-v0.1}
MODEL_TYPE_HF=mixtral

recipe_mcore2hf
