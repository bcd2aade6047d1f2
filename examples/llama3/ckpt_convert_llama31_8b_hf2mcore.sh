#!/usr/bin/env bash
# Convert Llama-3.1-8B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_llama31_8b_ptd.sh).
#   bash examples/llama3/ckpt_convert_llama31_8b_hf2mcore.sh
#   SMOKE=1 bash examples/llama3/ckpt_convert_llama31_8b_hf2mcore.sh   # a tiny random llama model, TP=2 PP=2
#   DRY_RUN=1 bash examples/llama3/ckpt_convert_llama31_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Llama-3.1-8B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/llama31-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=llama2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_hf2mcore
