#!/usr/bin/env bash
# Convert an Olmo-Hybrid-7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (OlmoHybridForCausalLM, in the layout its checkpoints store), and copy the
# tokenizer files beside them.
#   bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_mcore2hf.sh
#   SMOKE=1 bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/olmo_hybrid/ckpt_convert_olmo_hybrid_7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/olmo-hybrid-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Olmo-Hybrid-7B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-Hybrid-7B}
MODEL_TYPE_HF=olmo_hybrid

recipe_mcore2hf
