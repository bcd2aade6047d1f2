#!/usr/bin/env bash
# Convert a Seed-OSS-36B-Base checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/seed_oss/ckpt_convert_seed_oss_36b_mcore2hf.sh
#   SMOKE=1 bash examples/seed_oss/ckpt_convert_seed_oss_36b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/seed_oss/ckpt_convert_seed_oss_36b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/seed-oss-36b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Seed-OSS-36B-Base}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Seed-OSS-36B-Base}
MODEL_TYPE_HF=seed-oss

recipe_mcore2hf
