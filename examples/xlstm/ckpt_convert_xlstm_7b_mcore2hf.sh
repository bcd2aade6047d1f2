#!/usr/bin/env bash
# Convert an xLSTM-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (xLSTMForCausalLM), and copy the tokenizer files beside them.
#   bash examples/xlstm/ckpt_convert_xlstm_7b_mcore2hf.sh
#   SMOKE=1 bash examples/xlstm/ckpt_convert_xlstm_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/xlstm/ckpt_convert_xlstm_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/xlstm-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/xLSTM-7b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xLSTM-7b}
MODEL_TYPE_HF=xlstm

recipe_mcore2hf
