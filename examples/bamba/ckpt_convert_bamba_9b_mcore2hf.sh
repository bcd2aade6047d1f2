#!/usr/bin/env bash
# Convert a Bamba-9B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to Hugging
# Face safetensors + config.json (BambaForCausalLM: attn_layer_indices from the pattern's attention letters), and
# copy the tokenizer files beside them.
#   bash examples/bamba/ckpt_convert_bamba_9b_mcore2hf.sh
#   SMOKE=1 bash examples/bamba/ckpt_convert_bamba_9b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/bamba/ckpt_convert_bamba_9b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/bamba-9b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Bamba-9B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Bamba-9B}
MODEL_TYPE_HF=bamba

recipe_mcore2hf
