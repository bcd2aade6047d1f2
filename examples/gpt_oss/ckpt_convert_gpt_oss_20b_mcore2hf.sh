#!/usr/bin/env bash
# Convert a gpt-oss-20b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors (bf16, unquantized) + config.json, and copy the tokenizer files beside them.
#   bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_mcore2hf.sh
#   SMOKE=1 bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gpt_oss/ckpt_convert_gpt_oss_20b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gpt-oss-20b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/gpt-oss-20b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-oss-20b}
MODEL_TYPE_HF=gpt-oss

recipe_mcore2hf
