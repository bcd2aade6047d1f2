#!/usr/bin/env bash
# Convert a bitnet-b1.58-2B-4T-bf16 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/bitnet/ckpt_convert_bitnet_2b_mcore2hf.sh
#   SMOKE=1 bash examples/bitnet/ckpt_convert_bitnet_2b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/bitnet/ckpt_convert_bitnet_2b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/bitnet-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/bitnet-b1.58-2B-4T-bf16}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}
MODEL_TYPE_HF=bitnet

recipe_mcore2hf
