#!/usr/bin/env bash
# Convert gpt-neo-1.3B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_gpt_neo_1_3b_ptd.sh).
#   bash examples/gpt_neo/ckpt_convert_gpt_neo_1_3b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_neo/ckpt_convert_gpt_neo_1_3b_hf2mcore.sh   # a tiny random gpt_neo model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gpt_neo/ckpt_convert_gpt_neo_1_3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt-neo-1.3B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gpt-neo-1_3b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=gpt_neo

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neo HF_CONFIG='{"attention_types": [[["global", "local"], 1]], "window_size": 256, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_hf2mcore
