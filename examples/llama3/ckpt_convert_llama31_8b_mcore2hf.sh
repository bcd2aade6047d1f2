#!/usr/bin/env bash
# Convert a Llama-3.1-8B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/llama3/ckpt_convert_llama31_8b_mcore2hf.sh
#   SMOKE=1 bash examples/llama3/ckpt_convert_llama31_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/llama3/ckpt_convert_llama31_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/llama31-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Llama-3.1-8B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
MODEL_TYPE_HF=llama2

recipe_mcore2hf
