#!/usr/bin/env bash
# Convert a Phi-3.5-MoE-instruct checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/phimoe/ckpt_convert_phi35_moe_42b_mcore2hf.sh
#   SMOKE=1 bash examples/phimoe/ckpt_convert_phi35_moe_42b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/phimoe/ckpt_convert_phi35_moe_42b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/phi35_moe-42b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Phi-3.5-MoE-instruct}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3.5-MoE-instruct}
MODEL_TYPE_HF=phimoe

recipe_mcore2hf
