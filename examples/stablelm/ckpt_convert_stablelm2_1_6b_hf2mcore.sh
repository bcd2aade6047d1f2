#!/usr/bin/env bash
# Convert stablelm-2-1_6b from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_stablelm2_1_6b_ptd.sh).
#   bash examples/stablelm/ckpt_convert_stablelm2_1_6b_hf2mcore.sh
#   SMOKE=1 bash examples/stablelm/ckpt_convert_stablelm2_1_6b_hf2mcore.sh   # a tiny random stablelm model, TP=2 PP=2
#   DRY_RUN=1 bash examples/stablelm/ckpt_convert_stablelm2_1_6b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/stablelm-2-1_6b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/stablelm2-1_6b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=stablelm

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=stablelm HF_CONFIG='{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "rope_theta": 10000.0, "partial_rotary_factor": 0.25, "use_qkv_bias": true, "qk_layernorm": false, "use_parallel_residual": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_hf2mcore
