#!/usr/bin/env bash
# Convert a pythia-1.4b checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/gpt_neox/ckpt_convert_pythia_1_4b_mcore2hf.sh
#   SMOKE=1 bash examples/gpt_neox/ckpt_convert_pythia_1_4b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/gpt_neox/ckpt_convert_pythia_1_4b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/pythia-1-4b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/pythia-1.4b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/pythia-1.4b}
MODEL_TYPE_HF=gpt_neox

recipe_mcore2hf
