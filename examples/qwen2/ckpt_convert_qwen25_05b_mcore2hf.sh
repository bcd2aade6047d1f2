#!/usr/bin/env bash
# Convert a Qwen2.5-0.5B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/qwen2/ckpt_convert_qwen25_05b_mcore2hf.sh
#   SMOKE=1 bash examples/qwen2/ckpt_convert_qwen25_05b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/qwen2/ckpt_convert_qwen25_05b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/qwen25-05b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Qwen2.5-0.5B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-0.5B}
MODEL_TYPE_HF=qwen2

recipe_mcore2hf
