#!/usr/bin/env bash
# Convert a Hunyuan-7B-Pretrain checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/hunyuan/ckpt_convert_hunyuan_7b_mcore2hf.sh
#   SMOKE=1 bash examples/hunyuan/ckpt_convert_hunyuan_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/hunyuan/ckpt_convert_hunyuan_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/hunyuan-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Hunyuan-7B-Pretrain}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-7B-Pretrain}
MODEL_TYPE_HF=hunyuan

recipe_mcore2hf
