#!/usr/bin/env bash
# Convert a RecurrentGemma-2B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to
# Hugging Face safetensors + config.json (RecurrentGemmaForCausalLM: block_types from the --linear-attention-freq
# marks), and copy the tokenizer files beside them.
#   bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_mcore2hf.sh
#   SMOKE=1 bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/recurrent_gemma/ckpt_convert_recurrentgemma_2b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/recurrentgemma-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/recurrentgemma-2b}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/recurrentgemma-2b}
MODEL_TYPE_HF=recurrent_gemma

recipe_mcore2hf
