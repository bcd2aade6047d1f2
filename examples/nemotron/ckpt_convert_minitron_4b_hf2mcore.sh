#!/usr/bin/env bash
# Convert Minitron-4B-Base from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_minitron_4b_ptd.sh).
#   bash examples/nemotron/ckpt_convert_minitron_4b_hf2mcore.sh
#   SMOKE=1 bash examples/nemotron/ckpt_convert_minitron_4b_hf2mcore.sh   # a tiny random nemotron model, TP=2 PP=2
#   DRY_RUN=1 bash examples/nemotron/ckpt_convert_minitron_4b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Minitron-4B-Base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/minitron-4b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=nemotron

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nemotron HF_CONFIG='{"num_key_value_heads": 2, "head_dim": 32, "hidden_act": "relu2", "norm_eps": 1e-05, "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_hf2mcore
