#!/usr/bin/env bash
# Convert an LFM2-1.2B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (Lfm2ForCausalLM, layer_types from --linear-attention-freq, the FFN width
# written as is: block_auto_adjust_ff_dim false), and copy the tokenizer files beside them.
#   bash examples/lfm2/ckpt_convert_lfm2_1_2b_mcore2hf.sh
#   SMOKE=1 bash examples/lfm2/ckpt_convert_lfm2_1_2b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/lfm2/ckpt_convert_lfm2_1_2b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/lfm2-1.2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/LFM2-1.2B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-1.2B}
MODEL_TYPE_HF=lfm2

recipe_mcore2hf
