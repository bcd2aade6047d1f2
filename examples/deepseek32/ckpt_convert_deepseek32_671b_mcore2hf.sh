#!/usr/bin/env bash
# Convert a DeepSeek-V3.2-Exp checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/deepseek32/ckpt_convert_deepseek32_671b_mcore2hf.sh
#   SMOKE=1 bash examples/deepseek32/ckpt_convert_deepseek32_671b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/deepseek32/ckpt_convert_deepseek32_671b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/deepseek32-671b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/DeepSeek-V3.2-Exp}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V3.2-Exp}
MODEL_TYPE_HF=deepseek32

recipe_mcore2hf
