#!/usr/bin/env bash
# Convert a Qwen3.5-35B-A3B checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint), back
# to Hugging Face safetensors + config.json (the text model, Qwen3_5MoeForCausalLM: layer_types from
# --linear-attention-freq, rope_parameters with the interleaved sections, one tensor per expert), and copy the
# tokenizer files beside them.
#   bash examples/qwen3_5_moe_text/ckpt_convert_qwen35_35b_a3b_mcore2hf.sh
#   SMOKE=1 bash examples/qwen3_5_moe_text/ckpt_convert_qwen35_35b_a3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/qwen3_5_moe_text/ckpt_convert_qwen35_35b_a3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/qwen35-35b-a3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Qwen3.5-35B-A3B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3.5-35B-A3B}
MODEL_TYPE_HF=qwen3_5_moe_text

recipe_mcore2hf
