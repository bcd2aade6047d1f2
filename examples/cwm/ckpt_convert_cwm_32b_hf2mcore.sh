#!/usr/bin/env bash
# Convert cwm from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2
# (the layout of pretrain_cwm_32b_ptd.sh).
#   bash examples/cwm/ckpt_convert_cwm_32b_hf2mcore.sh
#   SMOKE=1 bash examples/cwm/ckpt_convert_cwm_32b_hf2mcore.sh   # a tiny random cwm model, TP=2 PP=2
#   DRY_RUN=1 bash examples/cwm/ckpt_convert_cwm_32b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/cwm}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/cwm-32b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
MODEL_TYPE_HF=cwm

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cwm HF_CONFIG='{"sliding_window": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 131072, "bos_token_id": 1, "eos_token_id": 2}'

recipe_hf2mcore
