#!/usr/bin/env bash
# Convert a Jamba-v0.1 checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (JambaForCausalLM: the attention and expert periods and offsets from the
# pattern's letters, one expert tensor per expert), and copy the tokenizer files beside them.
#   bash examples/jamba/ckpt_convert_jamba01_52b_mcore2hf.sh
#   SMOKE=1 bash examples/jamba/ckpt_convert_jamba01_52b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/jamba/ckpt_convert_jamba01_52b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/jamba01-52b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Jamba-v0.1}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jamba-v0.1}
MODEL_TYPE_HF=jamba

recipe_mcore2hf
