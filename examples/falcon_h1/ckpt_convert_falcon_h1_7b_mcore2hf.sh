#!/usr/bin/env bash
# Convert a Falcon-H1-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (FalconH1ForCausalLM, its muP scales from the flags), and copy the tokenizer
# files beside them.
#   bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_mcore2hf.sh
#   SMOKE=1 bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/falcon_h1/ckpt_convert_falcon_h1_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/falcon-h1-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Falcon-H1-7B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Falcon-H1-7B-Base}
MODEL_TYPE_HF=falcon_h1

recipe_mcore2hf
