#!/usr/bin/env bash
# Convert a MiniCPM3-4B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/minicpm3/ckpt_convert_minicpm3_4b_mcore2hf.sh
#   SMOKE=1 bash examples/minicpm3/ckpt_convert_minicpm3_4b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/minicpm3/ckpt_convert_minicpm3_4b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/minicpm3-4b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/MiniCPM3-4B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniCPM3-4B}
MODEL_TYPE_HF=minicpm3

recipe_mcore2hf
