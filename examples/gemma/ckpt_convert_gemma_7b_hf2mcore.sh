#!/usr/bin/env bash
# Convert gemma-7b from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_gemma_7b_ptd.sh).
#   bash examples/gemma/ckpt_convert_gemma_7b_hf2mcore.sh
#   SMOKE=1 bash examples/gemma/ckpt_convert_gemma_7b_hf2mcore.sh   # a tiny random gemma model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gemma/ckpt_convert_gemma_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gemma-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gemma-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=gemma

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma HF_CONFIG='{"num_key_value_heads": 4, "head_dim": 32, "hidden_act": "gelu", "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_hf2mcore
