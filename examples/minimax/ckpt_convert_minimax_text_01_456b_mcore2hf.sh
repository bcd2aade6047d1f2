#!/usr/bin/env bash
# Convert a MiniMax-Text-01 checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint), back
# to Hugging Face safetensors + config.json (MiniMaxForCausalLM, layer_types from --linear-attention-freq, the three
# alpha and beta factors from --residual-alpha / --residual-multiplier), and copy the tokenizer files beside them.
#   bash examples/minimax/ckpt_convert_minimax_text_01_456b_mcore2hf.sh
#   SMOKE=1 bash examples/minimax/ckpt_convert_minimax_text_01_456b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/minimax/ckpt_convert_minimax_text_01_456b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/minimax-text-01}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/MiniMax-Text-01}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-Text-01}
MODEL_TYPE_HF=minimax-text-01

recipe_mcore2hf
