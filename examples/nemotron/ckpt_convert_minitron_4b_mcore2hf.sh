#!/usr/bin/env bash
# Convert a Minitron-4B-Base checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/nemotron/ckpt_convert_minitron_4b_mcore2hf.sh
#   SMOKE=1 bash examples/nemotron/ckpt_convert_minitron_4b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/nemotron/ckpt_convert_minitron_4b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/minitron-4b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Minitron-4B-Base}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Minitron-4B-Base}
MODEL_TYPE_HF=nemotron

recipe_mcore2hf
