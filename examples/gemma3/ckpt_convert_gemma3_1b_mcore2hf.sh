#!/usr/bin/env bash
# Convert a gemma-3-1b-pt checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/gemma3/ckpt_convert_gemma3_1b_mcore2hf.sh
#   SMOKE=1 bash examples/gemma3/ckpt_convert_gemma3_1b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gemma3/ckpt_convert_gemma3_1b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/gemma3-1b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/gemma-3-1b-pt}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-3-1b-pt}
MODEL_TYPE_HF=gemma3

recipe_mcore2hf
