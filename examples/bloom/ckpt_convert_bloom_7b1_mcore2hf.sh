#!/usr/bin/env bash
# Convert a bloom-7b1 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/bloom/ckpt_convert_bloom_7b1_mcore2hf.sh
#   SMOKE=1 bash examples/bloom/ckpt_convert_bloom_7b1_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/bloom/ckpt_convert_bloom_7b1_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/bloom-7b1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/bloom-7b1}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bloom-7b1}
MODEL_TYPE_HF=bloom

recipe_mcore2hf
