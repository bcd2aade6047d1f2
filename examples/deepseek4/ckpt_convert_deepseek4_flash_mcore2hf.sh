#!/usr/bin/env bash
# Convert a DeepSeek-V4-Flash checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors (DeepSeek's tensor names) + config.json, and copy the tokenizer files beside them.
#   bash examples/deepseek4/ckpt_convert_deepseek4_flash_mcore2hf.sh
#   SMOKE=1 bash examples/deepseek4/ckpt_convert_deepseek4_flash_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/deepseek4/ckpt_convert_deepseek4_flash_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/deepseek4-flash}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/DeepSeek-V4-Flash}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V4-Flash-Base}
MODEL_TYPE_HF=deepseek4

recipe_mcore2hf
