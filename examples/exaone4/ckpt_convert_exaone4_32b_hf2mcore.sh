#!/usr/bin/env bash
# Convert EXAONE-4.0-32B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2
# (the layout of pretrain_exaone4_32b_ptd.sh).
#   bash examples/exaone4/ckpt_convert_exaone4_32b_hf2mcore.sh
#   SMOKE=1 bash examples/exaone4/ckpt_convert_exaone4_32b_hf2mcore.sh   # a tiny random exaone4 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/exaone4/ckpt_convert_exaone4_32b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/EXAONE-4.0-32B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/exaone4-32b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
MODEL_TYPE_HF=exaone4

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=exaone4 HF_CONFIG='{"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"], "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 131072}'

recipe_hf2mcore
