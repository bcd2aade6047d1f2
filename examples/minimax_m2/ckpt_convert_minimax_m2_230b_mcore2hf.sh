#!/usr/bin/env bash
# Convert a MiniMax-M2 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_mcore2hf.sh
#   SMOKE=1 bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/minimax-m2-230b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/MiniMax-M2}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-M2}
MODEL_TYPE_HF=minimax_m2

recipe_mcore2hf
