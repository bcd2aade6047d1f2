#!/usr/bin/env bash
# Convert a dots.llm1 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/dots1/ckpt_convert_dots_llm1_142b_mcore2hf.sh
#   SMOKE=1 bash examples/dots1/ckpt_convert_dots_llm1_142b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/dots1/ckpt_convert_dots_llm1_142b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/dots-llm1-142b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/dots.llm1}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dots.llm1}
MODEL_TYPE_HF=dots1

recipe_mcore2hf
