#!/usr/bin/env bash
# Convert an RWKV-4-Pile-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (RwkvForCausalLM), and copy the tokenizer files beside them.
#   bash examples/rwkv/ckpt_convert_rwkv4_7b_mcore2hf.sh
#   SMOKE=1 bash examples/rwkv/ckpt_convert_rwkv4_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/rwkv/ckpt_convert_rwkv4_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/rwkv4-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/rwkv-4-7b-pile}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/rwkv-4-7b-pile}
MODEL_TYPE_HF=rwkv

recipe_mcore2hf
