#!/usr/bin/env bash
# Convert a AFM-4.5B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/arcee/ckpt_convert_afm_45b_mcore2hf.sh
#   SMOKE=1 bash examples/arcee/ckpt_convert_afm_45b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/arcee/ckpt_convert_afm_45b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/afm-45b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/AFM-4.5B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/AFM-4.5B}
MODEL_TYPE_HF=arcee

recipe_mcore2hf
