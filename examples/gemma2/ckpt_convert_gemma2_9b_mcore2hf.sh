#!/usr/bin/env bash
# Convert a gemma-2-9b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/gemma2/ckpt_convert_gemma2_9b_mcore2hf.sh
#   SMOKE=1 bash examples/gemma2/ckpt_convert_gemma2_9b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gemma2/ckpt_convert_gemma2_9b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gemma2-9b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/gemma-2-9b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-2-9b}
MODEL_TYPE_HF=gemma2

recipe_mcore2hf
