#!/usr/bin/env bash
# Convert persimmon-8b-base from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_persimmon_8b_ptd.sh).
#   bash examples/persimmon/ckpt_convert_persimmon_8b_hf2mcore.sh
#   SMOKE=1 bash examples/persimmon/ckpt_convert_persimmon_8b_hf2mcore.sh   # a tiny random persimmon model, TP=2 PP=2
#   DRY_RUN=1 bash examples/persimmon/ckpt_convert_persimmon_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/persimmon-8b-base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/persimmon-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=persimmon

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=persimmon HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.5, "rope_theta": 25000.0, "hidden_act": "relu2", "layer_norm_eps": 1e-05, "qk_layernorm": true, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_hf2mcore
