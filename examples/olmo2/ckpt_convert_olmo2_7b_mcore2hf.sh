#!/usr/bin/env bash
# Convert a OLMo-2-1124-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/olmo2/ckpt_convert_olmo2_7b_mcore2hf.sh
#   SMOKE=1 bash examples/olmo2/ckpt_convert_olmo2_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/olmo2/ckpt_convert_olmo2_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/olmo2-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/OLMo-2-1124-7B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-2-1124-7B}
MODEL_TYPE_HF=olmo2

recipe_mcore2hf
