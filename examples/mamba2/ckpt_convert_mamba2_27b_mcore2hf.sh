#!/usr/bin/env bash
# Convert a Mamba2-2.7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json (Mamba2ForCausalLM), and copy the tokenizer files beside them.
#   bash examples/mamba2/ckpt_convert_mamba2_27b_mcore2hf.sh
#   SMOKE=1 bash examples/mamba2/ckpt_convert_mamba2_27b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/mamba2/ckpt_convert_mamba2_27b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/mamba2-2.7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/mamba2-2.7b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neox-20b}
MODEL_TYPE_HF=mamba2

recipe_mcore2hf
