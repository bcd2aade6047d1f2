#!/usr/bin/env bash
# Convert a Hunyuan-A13B-Pretrain checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_mcore2hf.sh
#   SMOKE=1 bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/hunyuan_v1_moe/ckpt_convert_hunyuan_a13b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/hunyuan-a13b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Hunyuan-A13B-Pretrain}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-A13B-Pretrain}
MODEL_TYPE_HF=hunyuan-moe

recipe_mcore2hf
