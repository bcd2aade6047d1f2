#!/usr/bin/env bash
# Convert a EXAONE-4.0-32B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/exaone4/ckpt_convert_exaone4_32b_mcore2hf.sh
#   SMOKE=1 bash examples/exaone4/ckpt_convert_exaone4_32b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/exaone4/ckpt_convert_exaone4_32b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/exaone4-32b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/EXAONE-4.0-32B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/EXAONE-4.0-32B}
MODEL_TYPE_HF=exaone4

recipe_mcore2hf
