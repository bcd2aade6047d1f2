#!/usr/bin/env bash
# Convert a GLM-4-9B-0414 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/glm4/ckpt_convert_glm4_0414_9b_mcore2hf.sh
#   SMOKE=1 bash examples/glm4/ckpt_convert_glm4_0414_9b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/glm4/ckpt_convert_glm4_0414_9b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/glm4-0414-9b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/GLM-4-9B-0414}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4-9B-0414}
MODEL_TYPE_HF=glm4

recipe_mcore2hf
