#!/usr/bin/env bash
# Convert Olmo-3-1025-7B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_olmo3_7b_ptd.sh).
#   bash examples/olmo3/ckpt_convert_olmo3_7b_hf2mcore.sh
#   SMOKE=1 bash examples/olmo3/ckpt_convert_olmo3_7b_hf2mcore.sh   # a tiny random olmo3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/olmo3/ckpt_convert_olmo3_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Olmo-3-1025-7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/olmo3-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=olmo3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo3 HF_CONFIG='{"sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

recipe_hf2mcore
