#!/usr/bin/env bash
# Convert a Qwen1.5-MoE-A2.7B checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_mcore2hf.sh
#   SMOKE=1 bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/qwen15-moe-a27b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Qwen1.5-MoE-A2.7B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen1.5-MoE-A2.7B}
MODEL_TYPE_HF=qwen2_moe

recipe_mcore2hf
