#!/usr/bin/env bash
# Convert a Ling-3.0-Flash checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint), back
# to Hugging Face safetensors in Ling's layout + config.json (BailingHybridForCausalLM, layer_types from
# --linear-attention-freq), and copy the tokenizer files beside them.
#   bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_mcore2hf.sh
#   SMOKE=1 bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/bailing_hybrid/ckpt_convert_ling_3_flash_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ling-3-flash}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Ling-3.0-Flash}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ling-3.0-Flash}
MODEL_TYPE_HF=bailing_hybrid

recipe_mcore2hf
