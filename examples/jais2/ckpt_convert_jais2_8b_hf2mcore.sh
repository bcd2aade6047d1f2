#!/usr/bin/env bash
# Convert Jais-2-8B from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2
# (the layout of pretrain_jais2_8b_ptd.sh).
#   bash examples/jais2/ckpt_convert_jais2_8b_hf2mcore.sh
#   SMOKE=1 bash examples/jais2/ckpt_convert_jais2_8b_hf2mcore.sh   # a tiny random jais2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/jais2/ckpt_convert_jais2_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Jais-2-8B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/jais2-8b-mcore-tp2pp2}
TP=${TP:-2} PP=${PP:-2}
MODEL_TYPE_HF=jais2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=jais2 HF_CONFIG='{"hidden_act": "relu2", "attention_bias": true, "mlp_bias": true, "layer_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

recipe_hf2mcore
