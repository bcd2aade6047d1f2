#!/usr/bin/env bash
# Convert a Phi-3-mini-4k-instruct checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/phi3/ckpt_convert_phi3_mini_4k_mcore2hf.sh
#   SMOKE=1 bash examples/phi3/ckpt_convert_phi3_mini_4k_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/phi3/ckpt_convert_phi3_mini_4k_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/phi3-mini-4k}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Phi-3-mini-4k-instruct}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3-mini-4k-instruct}
MODEL_TYPE_HF=phi3

recipe_mcore2hf
