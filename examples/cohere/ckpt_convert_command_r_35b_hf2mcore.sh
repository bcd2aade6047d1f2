#!/usr/bin/env bash
# Convert c4ai-command-r-v01 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2
# (the layout of pretrain_command_r_35b_ptd.sh).
#   bash examples/cohere/ckpt_convert_command_r_35b_hf2mcore.sh
#   SMOKE=1 bash examples/cohere/ckpt_convert_command_r_35b_hf2mcore.sh   # a tiny random cohere model, TP=2 PP=2
#   DRY_RUN=1 bash examples/cohere/ckpt_convert_command_r_35b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/c4ai-command-r-v01}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/command-r-35b-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2}
MODEL_TYPE_HF=cohere

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere HF_CONFIG='{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "rope_theta": 8000000.0, "use_qk_norm": false, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_hf2mcore
