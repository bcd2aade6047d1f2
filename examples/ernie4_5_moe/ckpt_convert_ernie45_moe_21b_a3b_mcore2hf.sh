#!/usr/bin/env bash
# Convert a ERNIE-4.5-21B-A3B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_mcore2hf.sh
#   SMOKE=1 bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ernie45-moe-21b-a3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/ERNIE-4.5-21B-A3B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-21B-A3B}
MODEL_TYPE_HF=ernie4_5_moe

recipe_mcore2hf
