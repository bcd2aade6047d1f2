#!/usr/bin/env bash
# Convert a opt-1.3b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/opt/ckpt_convert_opt_1_3b_mcore2hf.sh
#   SMOKE=1 bash examples/opt/ckpt_convert_opt_1_3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/opt/ckpt_convert_opt_1_3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/opt-1_3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/opt-1.3b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/opt-1.3b}
MODEL_TYPE_HF=opt

recipe_mcore2hf
