#!/usr/bin/env bash
# Convert phi-2 from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_phi2_2_7b_ptd.sh).
#   bash examples/phi/ckpt_convert_phi2_2_7b_hf2mcore.sh
#   SMOKE=1 bash examples/phi/ckpt_convert_phi2_2_7b_hf2mcore.sh   # a tiny random phi model, TP=2 PP=2
#   DRY_RUN=1 bash examples/phi/ckpt_convert_phi2_2_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/phi-2}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/phi2-2-7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=phi

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "hidden_act": "gelu_new", "layer_norm_eps": 1e-05, "qk_layernorm": false, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_hf2mcore
