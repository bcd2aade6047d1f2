#!/usr/bin/env bash
# Convert c4ai-command-r7b-12-2024 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_command_r7b_7b_ptd.sh).
#   bash examples/cohere2/ckpt_convert_command_r7b_7b_hf2mcore.sh
#   SMOKE=1 bash examples/cohere2/ckpt_convert_command_r7b_7b_hf2mcore.sh   # a tiny random cohere2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/cohere2/ckpt_convert_command_r7b_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/c4ai-command-r7b-12-2024}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/command-r7b-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=cohere2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere2 HF_CONFIG='{"layer_norm_eps": 1e-05, "logit_scale": 0.25, "rope_theta": 50000.0, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 132096}'

recipe_hf2mcore
