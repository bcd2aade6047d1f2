#!/usr/bin/env bash
# Convert a Emu3 text model (8B) checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/emu3/ckpt_convert_emu3_8b_mcore2hf.sh
#   SMOKE=1 bash examples/emu3/ckpt_convert_emu3_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/emu3/ckpt_convert_emu3_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/emu3-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Emu3-Chat-text}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Emu3-Chat-text}
MODEL_TYPE_HF=emu3

recipe_mcore2hf
