#!/usr/bin/env bash
# Convert a ERNIE-4.5-0.3B-Base-PT checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_mcore2hf.sh
#   SMOKE=1 bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ernie4-5-03b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/ERNIE-4.5-0.3B-Base-PT}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}
MODEL_TYPE_HF=ernie4_5

recipe_mcore2hf
