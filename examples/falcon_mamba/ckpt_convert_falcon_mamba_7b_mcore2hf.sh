#!/usr/bin/env bash
# Convert a FalconMamba-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json (FalconMambaForCausalLM), and copy the tokenizer files beside them.
#   bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_mcore2hf.sh
#   SMOKE=1 bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_mcore2hf.sh   # runs the hf2mcore smoke first,
#                                                  # then checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/falcon_mamba/ckpt_convert_falcon_mamba_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/falcon-mamba-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/falcon-mamba-7b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-mamba-7b}
MODEL_TYPE_HF=falcon_mamba

recipe_mcore2hf
