#!/usr/bin/env bash
# Convert granite-swash-2b from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_granite_swa_2b_ptd.sh).
#   bash examples/granite_swa/ckpt_convert_granite_swa_2b_hf2mcore.sh
#   SMOKE=1 bash examples/granite_swa/ckpt_convert_granite_swa_2b_hf2mcore.sh   # a tiny random granite_swa model, TP=2 PP=2
#   DRY_RUN=1 bash examples/granite_swa/ckpt_convert_granite_swa_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/granite-swash-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/granite_swa-2b-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=granite_swa

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granite_swa HF_CONFIG='{"sliding_window": 128, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_hf2mcore
