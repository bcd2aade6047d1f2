#!/usr/bin/env bash
# Convert a Mistral-Small-4-119B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/mistral4/ckpt_convert_mistral_small4_119b_mcore2hf.sh
#   SMOKE=1 bash examples/mistral4/ckpt_convert_mistral_small4_119b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/mistral4/ckpt_convert_mistral_small4_119b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/mistral-small4-119b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Mistral-Small-4-119B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-Small-4-119B}
MODEL_TYPE_HF=mistral4

recipe_mcore2hf
