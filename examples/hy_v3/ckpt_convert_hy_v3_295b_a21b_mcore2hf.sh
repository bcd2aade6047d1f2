#!/usr/bin/env bash
# Convert a HY-V3 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_mcore2hf.sh
#   SMOKE=1 bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/hy_v3/ckpt_convert_hy_v3_295b_a21b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/hy-v3-295b-a21b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/HY-V3}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HY-V3}
MODEL_TYPE_HF=hy_v3

recipe_mcore2hf
