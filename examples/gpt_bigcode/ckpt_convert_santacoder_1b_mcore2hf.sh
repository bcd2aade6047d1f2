#!/usr/bin/env bash
# Convert a gpt_bigcode-santacoder checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_mcore2hf.sh
#   SMOKE=1 bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/santacoder-1b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/gpt_bigcode-santacoder}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt_bigcode-santacoder}
MODEL_TYPE_HF=gpt_bigcode

recipe_mcore2hf
