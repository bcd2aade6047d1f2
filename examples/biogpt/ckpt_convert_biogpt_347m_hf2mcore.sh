#!/usr/bin/env bash
# Convert biogpt from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_biogpt_347m_ptd.sh).
#   bash examples/biogpt/ckpt_convert_biogpt_347m_hf2mcore.sh
#   SMOKE=1 bash examples/biogpt/ckpt_convert_biogpt_347m_hf2mcore.sh   # a tiny random biogpt model, TP=2 PP=2
#   DRY_RUN=1 bash examples/biogpt/ckpt_convert_biogpt_347m_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/biogpt}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/biogpt-347m-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=biogpt

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=biogpt HF_CONFIG='{"hidden_act": "gelu", "scale_embedding": true, "tie_word_embeddings": true, "max_position_embeddings": 1024}'

recipe_hf2mcore
