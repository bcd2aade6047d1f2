#!/usr/bin/env bash
# Convert Phi-3-mini-4k-instruct from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=1
# (the layout of pretrain_phi3_mini_4k_ptd.sh).
#   bash examples/phi3/ckpt_convert_phi3_mini_4k_hf2mcore.sh
#   SMOKE=1 bash examples/phi3/ckpt_convert_phi3_mini_4k_hf2mcore.sh   # a tiny random phi3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/phi3/ckpt_convert_phi3_mini_4k_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Phi-3-mini-4k-instruct}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/phi3-mini-4k-mcore-tp4pp1}
TP=${TP:-4} PP=${PP:-1}
MODEL_TYPE_HF=phi3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi3 HF_CONFIG='{"num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": false, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "pad_token_id": null}'

recipe_hf2mcore
