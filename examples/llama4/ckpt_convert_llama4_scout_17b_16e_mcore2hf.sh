#!/usr/bin/env bash
# Convert a Llama-4-Scout-17B-16E text checkpoint in our Megatron (mcore) layout, any TP/PP (read from the
# checkpoint), back to Hugging Face safetensors + config.json (Llama4ForCausalLM, model_type llama4_text), and
# copy the tokenizer files beside them.
#   bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_mcore2hf.sh
#   SMOKE=1 bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/llama4/ckpt_convert_llama4_scout_17b_16e_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/llama4-scout-17b-16e}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Llama-4-Scout-17B-16E}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-4-Scout-17B-16E}
MODEL_TYPE_HF=llama4

recipe_mcore2hf
