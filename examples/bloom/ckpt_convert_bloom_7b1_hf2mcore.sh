#!/usr/bin/env bash
# Convert bloom-7b1 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_bloom_7b1_ptd.sh).
#   bash examples/bloom/ckpt_convert_bloom_7b1_hf2mcore.sh
#   SMOKE=1 bash examples/bloom/ckpt_convert_bloom_7b1_hf2mcore.sh   # a tiny random bloom model, TP=2 PP=2
#   DRY_RUN=1 bash examples/bloom/ckpt_convert_bloom_7b1_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/bloom-7b1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/bloom-7b1-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=bloom

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bloom HF_CONFIG='{"layer_norm_epsilon": 1e-05, "apply_residual_connection_post_layernorm": false, "tie_word_embeddings": true}'

recipe_hf2mcore
