#!/usr/bin/env bash
# Convert a Zamba2-2.7B checkpoint in our Megatron (mcore) layout, any TP/PP (read from the checkpoint), back to Hugging
# Face safetensors + config.json (Zamba2ForCausalLM: layers_block_type from the pattern's 'Z' letters, each shared
# block written once under its first hybrid layer), and copy the tokenizer files beside them.
#   bash examples/zamba2/ckpt_convert_zamba2_2p7b_mcore2hf.sh
#   SMOKE=1 bash examples/zamba2/ckpt_convert_zamba2_2p7b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/zamba2/ckpt_convert_zamba2_2p7b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/zamba2-2p7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Zamba2-2.7B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba2-2.7B}
MODEL_TYPE_HF=zamba2

recipe_mcore2hf
