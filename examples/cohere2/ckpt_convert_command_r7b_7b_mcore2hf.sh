#!/usr/bin/env bash
# Convert a c4ai-command-r7b-12-2024 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/cohere2/ckpt_convert_command_r7b_7b_mcore2hf.sh
#   SMOKE=1 bash examples/cohere2/ckpt_convert_command_r7b_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/cohere2/ckpt_convert_command_r7b_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/command-r7b-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/c4ai-command-r7b-12-2024}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r7b-12-2024}
MODEL_TYPE_HF=cohere2

recipe_mcore2hf
