#!/usr/bin/env bash
# Convert Llama-2-7B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_llama2_7b_ptd.sh).
#   bash examples/llama2/ckpt_convert_llama2_7b_hf2mcore.sh
#   SMOKE=1 bash examples/llama2/ckpt_convert_llama2_7b_hf2mcore.sh   # a tiny random llama model, TP=2 PP=2
#   DRY_RUN=1 bash examples/llama2/ckpt_convert_llama2_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Llama-2-7b-hf}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/llama2-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=llama2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false}'

recipe_hf2mcore
