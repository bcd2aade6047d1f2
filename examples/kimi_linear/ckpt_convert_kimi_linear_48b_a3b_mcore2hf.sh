#!/usr/bin/env bash
# Convert a Kimi-Linear-48B-A3B checkpoint in our Megatron (mcore) layout, any TP/PP/EP (read from the checkpoint),
# back to Hugging Face safetensors in Moonshot's layout + config.json (KimiLinearForCausalLM, layer_types and
# linear_attn_config from --linear-attention-freq), and copy the tokenizer files beside them.
#   bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_mcore2hf.sh
#   SMOKE=1 bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_mcore2hf.sh   # runs the hf2mcore smoke first, then
#                                                    # checks that every tensor comes back identical
#   DRY_RUN=1 bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_mcore2hf.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./ckpt/kimi-linear-48b-a3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_from_mcore/Kimi-Linear-48B-A3B}
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Kimi-Linear-48B-A3B-Instruct}
MODEL_TYPE_HF=kimi-linear

recipe_mcore2hf
