#!/usr/bin/env bash
# Convert helium-1-preview-2b from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_helium1_preview_2b_ptd.sh).
#   bash examples/helium/ckpt_convert_helium1_preview_2b_hf2mcore.sh
#   SMOKE=1 bash examples/helium/ckpt_convert_helium1_preview_2b_hf2mcore.sh   # a tiny random helium model, TP=2 PP=2
#   DRY_RUN=1 bash examples/helium/ckpt_convert_helium1_preview_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/helium-1-preview-2b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/helium1-preview-2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=helium

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=helium HF_CONFIG='{"num_key_value_heads": 4, "head_dim": 16, "rms_norm_eps": 1e-08, "rope_theta": 100000.0, "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_hf2mcore
