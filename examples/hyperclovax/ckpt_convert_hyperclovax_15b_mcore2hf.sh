#!/usr/bin/env bash
# Convert a HyperCLOVAX-SEED-Text-Instruct-1.5B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_mcore2hf.sh
#   SMOKE=1 bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/hyperclovax/ckpt_convert_hyperclovax_15b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/hyperclovax-15b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/HyperCLOVAX-SEED-Text-Instruct-1.5B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HyperCLOVAX-SEED-Text-Instruct-1.5B}
MODEL_TYPE_HF=hyperclovax

recipe_mcore2hf
