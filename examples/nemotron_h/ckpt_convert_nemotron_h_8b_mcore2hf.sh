#!/usr/bin/env bash
# Convert a Nemotron-H-8B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (NemotronHForCausalLM, layers_block_type from the hybrid pattern), and
# copy the tokenizer files beside them.
#   bash examples/nemotron_h/ckpt_convert_nemotron_h_8b_mcore2hf.sh
#   SMOKE=1 bash examples/nemotron_h/ckpt_convert_nemotron_h_8b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/nemotron_h/ckpt_convert_nemotron_h_8b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/nemotron-h-8b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/nemotron-h-8b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Nemotron-H-8B-Base-8K}
MODEL_TYPE_HF=nemotron_h

recipe_mcore2hf
