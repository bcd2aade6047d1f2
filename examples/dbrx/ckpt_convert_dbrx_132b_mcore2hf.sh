#!/usr/bin/env bash
# Convert a dbrx-base checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/dbrx/ckpt_convert_dbrx_132b_mcore2hf.sh
#   SMOKE=1 bash examples/dbrx/ckpt_convert_dbrx_132b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/dbrx/ckpt_convert_dbrx_132b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/dbrx-132b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/dbrx-base}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dbrx-base}
MODEL_TYPE_HF=dbrx

recipe_mcore2hf
