#!/usr/bin/env bash
# Convert a phi-2 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/phi/ckpt_convert_phi2_2_7b_mcore2hf.sh
#   SMOKE=1 bash examples/phi/ckpt_convert_phi2_2_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/phi/ckpt_convert_phi2_2_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/phi2-2-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/phi-2}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/phi-2}
MODEL_TYPE_HF=phi

recipe_mcore2hf
