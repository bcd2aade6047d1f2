#!/usr/bin/env bash
# Convert a codegen-2B-mono checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/codegen/ckpt_convert_codegen_2b_mono_mcore2hf.sh
#   SMOKE=1 bash examples/codegen/ckpt_convert_codegen_2b_mono_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/codegen/ckpt_convert_codegen_2b_mono_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/codegen-2b-mono}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/codegen-2B-mono}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/codegen-2B-mono}
MODEL_TYPE_HF=codegen

recipe_mcore2hf
