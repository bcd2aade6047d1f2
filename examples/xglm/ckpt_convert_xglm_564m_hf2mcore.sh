#!/usr/bin/env bash
# Convert xglm-564M from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_xglm_564m_ptd.sh).
#   bash examples/xglm/ckpt_convert_xglm_564m_hf2mcore.sh
#   SMOKE=1 bash examples/xglm/ckpt_convert_xglm_564m_hf2mcore.sh   # a tiny random xglm model, TP=2 PP=2
#   DRY_RUN=1 bash examples/xglm/ckpt_convert_xglm_564m_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/xglm-564M}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/xglm-564m-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=xglm

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xglm HF_CONFIG='{"activation_function": "gelu", "scale_embedding": true, "pad_token_id": 1, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_hf2mcore
