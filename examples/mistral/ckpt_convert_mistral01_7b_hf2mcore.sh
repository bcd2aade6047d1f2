#!/usr/bin/env bash
# Convert Mistral-7B-v0.1 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_mistral01_7b_ptd.sh).
#   bash examples/mistral/ckpt_convert_mistral01_7b_hf2mcore.sh
#   SMOKE=1 bash examples/mistral/ckpt_convert_mistral01_7b_hf2mcore.sh   # a tiny random mistral model, TP=2 PP=2
#   DRY_RUN=1 bash examples/mistral/ckpt_convert_mistral01_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Mistral-7B-v0.1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mistral01-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=mistral

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mistral HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": false}'

recipe_hf2mcore
