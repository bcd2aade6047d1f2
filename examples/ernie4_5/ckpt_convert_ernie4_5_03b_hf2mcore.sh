#!/usr/bin/env bash
# Convert ERNIE-4.5-0.3B-Base-PT from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_ernie4_5_03b_ptd.sh).
#   bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_hf2mcore.sh
#   SMOKE=1 bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_hf2mcore.sh   # a tiny random ernie4_5 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/ernie4_5/ckpt_convert_ernie4_5_03b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ernie4-5-03b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=ernie4_5

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ernie4_5 HF_CONFIG='{"use_bias": false, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "head_dim": 32, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_hf2mcore
