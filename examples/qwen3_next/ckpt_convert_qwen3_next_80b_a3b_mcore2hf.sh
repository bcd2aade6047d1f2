#!/usr/bin/env bash
# Convert a Qwen3-Next-80B-A3B checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint),
# back to Hugging Face safetensors + config.json (Qwen3NextForCausalLM, layer_types from --linear-attention-freq),
# and copy the tokenizer files beside them.
#   bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_mcore2hf.sh
#   SMOKE=1 bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/qwen3-next-80b-a3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Qwen3-Next-80B-A3B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-Next-80B-A3B-Instruct}
MODEL_TYPE_HF=qwen3-next

recipe_mcore2hf
