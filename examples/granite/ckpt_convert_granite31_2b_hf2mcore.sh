#!/usr/bin/env bash
# Convert granite-3.1-2b-base from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_granite31_2b_ptd.sh).
#   bash examples/granite/ckpt_convert_granite31_2b_hf2mcore.sh
#   SMOKE=1 bash examples/granite/ckpt_convert_granite31_2b_hf2mcore.sh   # a tiny random granite model, TP=2 PP=2
#   DRY_RUN=1 bash examples/granite/ckpt_convert_granite31_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/granite-3.1-2b-base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/granite31-2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=granite

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granite HF_CONFIG='{"embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 8.0, "rms_norm_eps": 1e-05, "rope_theta": 5000000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_hf2mcore
