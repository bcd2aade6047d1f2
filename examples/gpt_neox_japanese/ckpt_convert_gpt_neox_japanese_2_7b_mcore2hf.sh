#!/usr/bin/env bash
# Convert a gpt-neox-japanese-2.7b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_mcore2hf.sh
#   SMOKE=1 bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gpt-neox-japanese-2-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/gpt-neox-japanese-2.7b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neox-japanese-2.7b}
MODEL_TYPE_HF=gpt_neox_japanese

recipe_mcore2hf
