#!/usr/bin/env bash
# Convert Mamba2-2.7B from Hugging Face safetensors (transformers' Mamba2ForCausalLM layout, model_type mamba2)
# to our Megatron (mcore) layout at TP=2 PP=1 (the layout of pretrain_mamba2_27b_ptd.sh).
#   bash examples/mamba2/ckpt_convert_mamba2_27b_hf2mcore.sh
#   SMOKE=1 bash examples/mamba2/ckpt_convert_mamba2_27b_hf2mcore.sh   # a tiny random mamba2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/mamba2/ckpt_convert_mamba2_27b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/mamba2-2.7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mamba2-2.7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=mamba2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mamba2 HF_CONFIG='{"num_heads": 2, "head_dim": 64, "n_groups": 1, "state_size": 128, "expand": 2, "conv_kernel": 4, "chunk_size": 256, "use_bias": false, "use_conv_bias": true, "layer_norm_epsilon": 1e-05, "residual_in_fp32": true, "tie_word_embeddings": true}'

recipe_hf2mcore
