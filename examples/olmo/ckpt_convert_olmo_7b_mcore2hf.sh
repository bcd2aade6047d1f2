#!/usr/bin/env bash
# Convert a OLMo-7B-hf checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/olmo/ckpt_convert_olmo_7b_mcore2hf.sh
#   SMOKE=1 bash examples/olmo/ckpt_convert_olmo_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/olmo/ckpt_convert_olmo_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/olmo-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/OLMo-7B-hf}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-7B-hf}
MODEL_TYPE_HF=olmo

recipe_mcore2hf
