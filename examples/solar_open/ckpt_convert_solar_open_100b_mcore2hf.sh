#!/usr/bin/env bash
# Convert a Solar-Open-100B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/solar_open/ckpt_convert_solar_open_100b_mcore2hf.sh
#   SMOKE=1 bash examples/solar_open/ckpt_convert_solar_open_100b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/solar_open/ckpt_convert_solar_open_100b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/solar-open-100b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Solar-Open-100B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Solar-Open-100B}
MODEL_TYPE_HF=solar_open

recipe_mcore2hf
