#!/usr/bin/env bash
# Convert a Mistral-7B-v0.3 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/mistral/ckpt_convert_mistral_7b_mcore2hf.sh
#   SMOKE=1 bash examples/mistral/ckpt_convert_mistral_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/mistral/ckpt_convert_mistral_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/mistral-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Mistral-7B-v0.3}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}
MODEL_TYPE_HF=mistral

recipe_mcore2hf
