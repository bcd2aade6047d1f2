#!/usr/bin/env bash
# Convert Seed-OSS-36B-Base from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2
# (the layout of pretrain_seed_oss_36b_ptd.sh).
#   bash examples/seed_oss/ckpt_convert_seed_oss_36b_hf2mcore.sh
#   SMOKE=1 bash examples/seed_oss/ckpt_convert_seed_oss_36b_hf2mcore.sh   # a tiny random seed_oss model, TP=2 PP=2
#   DRY_RUN=1 bash examples/seed_oss/ckpt_convert_seed_oss_36b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Seed-OSS-36B-Base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/seed-oss-36b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
MODEL_TYPE_HF=seed-oss

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=seed_oss HF_CONFIG='{"attention_bias": true, "attention_out_bias": false, "mlp_bias": false, "rms_norm_eps": 1e-06, "rope_theta": 10000000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 524288, "attention_dropout": 0.0, "residual_dropout": 0.0}'

recipe_hf2mcore
