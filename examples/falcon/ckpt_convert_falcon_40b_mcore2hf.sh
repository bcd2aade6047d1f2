#!/usr/bin/env bash
# Convert a falcon-40b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/falcon/ckpt_convert_falcon_40b_mcore2hf.sh
#   SMOKE=1 bash examples/falcon/ckpt_convert_falcon_40b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/falcon/ckpt_convert_falcon_40b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/falcon-40b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/falcon-40b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-40b}
MODEL_TYPE_HF=falcon

recipe_mcore2hf
