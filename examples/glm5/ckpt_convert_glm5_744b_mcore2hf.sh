#!/usr/bin/env bash
# Convert a GLM-5 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/glm5/ckpt_convert_glm5_744b_mcore2hf.sh
#   SMOKE=1 bash examples/glm5/ckpt_convert_glm5_744b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/glm5/ckpt_convert_glm5_744b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/glm5-744b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/GLM-5}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-5}
MODEL_TYPE_HF=glm5

recipe_mcore2hf
