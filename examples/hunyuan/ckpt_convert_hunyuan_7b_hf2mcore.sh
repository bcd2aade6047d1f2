#!/usr/bin/env bash
# Convert Hunyuan-7B-Pretrain from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_hunyuan_7b_ptd.sh).
#   bash examples/hunyuan/ckpt_convert_hunyuan_7b_hf2mcore.sh
#   SMOKE=1 bash examples/hunyuan/ckpt_convert_hunyuan_7b_hf2mcore.sh   # a tiny random hunyuan_v1_dense model, TP=2 PP=2
#   DRY_RUN=1 bash examples/hunyuan/ckpt_convert_hunyuan_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Hunyuan-7B-Pretrain}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/hunyuan-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=hunyuan

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_dense HF_CONFIG='{"rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 262144}'

recipe_hf2mcore
