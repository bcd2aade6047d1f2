#!/usr/bin/env bash
# Convert a stablelm-2-1_6b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/stablelm/ckpt_convert_stablelm2_1_6b_mcore2hf.sh
#   SMOKE=1 bash examples/stablelm/ckpt_convert_stablelm2_1_6b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/stablelm/ckpt_convert_stablelm2_1_6b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/stablelm2-1_6b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/stablelm-2-1_6b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/stablelm-2-1_6b}
MODEL_TYPE_HF=stablelm

recipe_mcore2hf
