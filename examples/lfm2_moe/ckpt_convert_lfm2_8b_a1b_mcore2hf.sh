#!/usr/bin/env bash
# Convert an LFM2-8B-A1B checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (Lfm2MoeForCausalLM: layer_types from --linear-attention-freq, one expert
# tensor per expert), and copy the tokenizer files beside them.
#   bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_mcore2hf.sh
#   SMOKE=1 bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/lfm2_moe/ckpt_convert_lfm2_8b_a1b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/lfm2-8b-a1b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/LFM2-8B-A1B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-8B-A1B}
MODEL_TYPE_HF=lfm2_moe

recipe_mcore2hf
