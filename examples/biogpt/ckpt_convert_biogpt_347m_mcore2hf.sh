#!/usr/bin/env bash
# Convert a biogpt checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/biogpt/ckpt_convert_biogpt_347m_mcore2hf.sh
#   SMOKE=1 bash examples/biogpt/ckpt_convert_biogpt_347m_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/biogpt/ckpt_convert_biogpt_347m_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/biogpt-347m}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/biogpt}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/biogpt}
MODEL_TYPE_HF=biogpt

recipe_mcore2hf
