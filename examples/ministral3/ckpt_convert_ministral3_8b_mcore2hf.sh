#!/usr/bin/env bash
# Convert a Ministral-3-8B-Base-2512 (text model) checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/ministral3/ckpt_convert_ministral3_8b_mcore2hf.sh
#   SMOKE=1 bash examples/ministral3/ckpt_convert_ministral3_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/ministral3/ckpt_convert_ministral3_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ministral3-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Ministral-3-8B-Base-2512-text}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-3-8B-Base-2512-text}
MODEL_TYPE_HF=ministral3

recipe_mcore2hf
