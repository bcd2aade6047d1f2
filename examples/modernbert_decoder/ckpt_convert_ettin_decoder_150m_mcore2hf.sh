#!/usr/bin/env bash
# Convert a ettin-decoder-150m checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint),
# back to Hugging Face safetensors + config.json, and copy the tokenizer files beside them.
#   bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_mcore2hf.sh
#   SMOKE=1 bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/modernbert_decoder/ckpt_convert_ettin_decoder_150m_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/ettin-decoder-150m}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/ettin-decoder-150m}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ettin-decoder-150m}
MODEL_TYPE_HF=modernbert-decoder

recipe_mcore2hf
