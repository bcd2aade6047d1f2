#!/usr/bin/env bash
# Convert Mamba-2.8B from Hugging Face safetensors (transformers' MambaForCausalLM layout, model_type mamba;
# state-spaces/mamba-2.8b-hf) to our Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_mamba_28b_ptd.sh).
#   bash examples/mamba/ckpt_convert_mamba_28b_hf2mcore.sh
#   SMOKE=1 bash examples/mamba/ckpt_convert_mamba_28b_hf2mcore.sh   # a tiny random mamba model, TP=2 PP=2
#   DRY_RUN=1 bash examples/mamba/ckpt_convert_mamba_28b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/mamba-2.8b-hf}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mamba-2.8b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=mamba

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mamba HF_CONFIG='{"state_size": 16, "expand": 2, "conv_kernel": 4, "time_step_rank": 160, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-05, "residual_in_fp32": true, "tie_word_embeddings": true}'

recipe_hf2mcore
