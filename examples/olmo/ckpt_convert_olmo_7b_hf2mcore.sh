#!/usr/bin/env bash
# Convert OLMo-7B-hf from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_olmo_7b_ptd.sh).
#   bash examples/olmo/ckpt_convert_olmo_7b_hf2mcore.sh
#   SMOKE=1 bash examples/olmo/ckpt_convert_olmo_7b_hf2mcore.sh   # a tiny random olmo model, TP=2 PP=2
#   DRY_RUN=1 bash examples/olmo/ckpt_convert_olmo_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/OLMo-7B-hf}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/olmo-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=olmo

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo HF_CONFIG='{"clip_qkv": null, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_hf2mcore
