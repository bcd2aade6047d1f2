#!/usr/bin/env bash
# Convert a Jais-2-8B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/jais2/ckpt_convert_jais2_8b_mcore2hf.sh
#   SMOKE=1 bash examples/jais2/ckpt_convert_jais2_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/jais2/ckpt_convert_jais2_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/jais2-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Jais-2-8B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jais-2-8B}
MODEL_TYPE_HF=jais2

recipe_mcore2hf
