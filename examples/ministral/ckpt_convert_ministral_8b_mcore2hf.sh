#!/usr/bin/env bash
# Convert a Ministral-8B-Instruct-2410 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/ministral/ckpt_convert_ministral_8b_mcore2hf.sh
#   SMOKE=1 bash examples/ministral/ckpt_convert_ministral_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/ministral/ckpt_convert_ministral_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ministral-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Ministral-8B-Instruct-2410}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-8B-Instruct-2410}
MODEL_TYPE_HF=ministral

recipe_mcore2hf
