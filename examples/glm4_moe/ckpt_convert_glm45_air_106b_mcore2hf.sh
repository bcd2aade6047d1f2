#!/usr/bin/env bash
# Convert a GLM-4.5-Air checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/glm4_moe/ckpt_convert_glm45_air_106b_mcore2hf.sh
#   SMOKE=1 bash examples/glm4_moe/ckpt_convert_glm45_air_106b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/glm4_moe/ckpt_convert_glm45_air_106b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/glm45-air-106b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/GLM-4.5-Air}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.5-Air}
MODEL_TYPE_HF=glm45

recipe_mcore2hf
