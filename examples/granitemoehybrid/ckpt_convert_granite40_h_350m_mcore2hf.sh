#!/usr/bin/env bash
# Convert a Granite-4.0-H-350M checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back
# to Hugging Face safetensors + config.json (GraniteMoeHybridForCausalLM: layer_types from the pattern's mixer
# letters, one per pair), and copy the tokenizer files beside them.
#   bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_mcore2hf.sh
#   SMOKE=1 bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/granitemoehybrid/ckpt_convert_granite40_h_350m_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/granite-4.0-h-350m}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/granite-4.0-h-350m}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-4.0-h-350m}
MODEL_TYPE_HF=granitemoehybrid

recipe_mcore2hf
