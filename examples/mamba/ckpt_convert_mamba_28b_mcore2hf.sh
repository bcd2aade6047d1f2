#!/usr/bin/env bash
# Convert a Mamba-2.8B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json (MambaForCausalLM), and copy the tokenizer files beside them.
#   bash examples/mamba/ckpt_convert_mamba_28b_mcore2hf.sh
#   SMOKE=1 bash examples/mamba/ckpt_convert_mamba_28b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                  # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/mamba/ckpt_convert_mamba_28b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/mamba-2.8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/mamba-2.8b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mamba-2.8b-hf}
MODEL_TYPE_HF=mamba

recipe_mcore2hf
