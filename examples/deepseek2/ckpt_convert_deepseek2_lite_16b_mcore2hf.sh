#!/usr/bin/env bash
# Convert a DeepSeek-V2-Lite checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_mcore2hf.sh
#   SMOKE=1 bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/deepseek2-lite-16b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/DeepSeek-V2-Lite}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V2-Lite}
MODEL_TYPE_HF=deepseek2-lite

recipe_mcore2hf
