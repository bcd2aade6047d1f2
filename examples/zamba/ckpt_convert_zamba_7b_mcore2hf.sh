#!/usr/bin/env bash
# Convert a Zamba-7B-v1 checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (ZambaForCausalLM: layers_block_type from the pattern's 'Z' letters, the
# shared block written once under the first hybrid layer), and copy the tokenizer files beside them.
#   bash examples/zamba/ckpt_convert_zamba_7b_mcore2hf.sh
#   SMOKE=1 bash examples/zamba/ckpt_convert_zamba_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/zamba/ckpt_convert_zamba_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/zamba-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Zamba-7B-v1}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba-7B-v1}
MODEL_TYPE_HF=zamba

recipe_mcore2hf
