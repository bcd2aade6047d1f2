#!/usr/bin/env bash
# Convert Ministral-8B-Instruct-2410 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_ministral_8b_ptd.sh).
#   bash examples/ministral/ckpt_convert_ministral_8b_hf2mcore.sh
#   SMOKE=1 bash examples/ministral/ckpt_convert_ministral_8b_hf2mcore.sh   # a tiny random ministral model, TP=2 PP=2
#   DRY_RUN=1 bash examples/ministral/ckpt_convert_ministral_8b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Ministral-8B-Instruct-2410}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ministral-8b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=ministral

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-05, "rope_theta": 100000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'

recipe_hf2mcore
