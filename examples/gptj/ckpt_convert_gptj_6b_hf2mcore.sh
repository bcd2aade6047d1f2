#!/usr/bin/env bash
# Convert gpt-j-6b from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_gptj_6b_ptd.sh).
#   bash examples/gptj/ckpt_convert_gptj_6b_hf2mcore.sh
#   SMOKE=1 bash examples/gptj/ckpt_convert_gptj_6b_hf2mcore.sh   # a tiny random gptj model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gptj/ckpt_convert_gptj_6b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt-j-6b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gptj-6b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
# (rotary_dim 4 of the tiny model's 16 dims per head: gpt-j-6b's 64 of 256)
MODEL_TYPE_HF=gptj

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gptj HF_CONFIG='{"rotary_dim": 4, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": false, "n_positions": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_hf2mcore
