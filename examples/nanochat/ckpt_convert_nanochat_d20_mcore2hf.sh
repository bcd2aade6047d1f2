#!/usr/bin/env bash
# Convert a nanochat-d20 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/nanochat/ckpt_convert_nanochat_d20_mcore2hf.sh
#   SMOKE=1 bash examples/nanochat/ckpt_convert_nanochat_d20_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/nanochat/ckpt_convert_nanochat_d20_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/nanochat-d20}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/nanochat-d20}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/nanochat-d20}
MODEL_TYPE_HF=nanochat

recipe_mcore2hf
