#!/usr/bin/env bash
# Convert opt-1.3b from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_opt_1_3b_ptd.sh).
#   bash examples/opt/ckpt_convert_opt_1_3b_hf2mcore.sh
#   SMOKE=1 bash examples/opt/ckpt_convert_opt_1_3b_hf2mcore.sh   # a tiny random opt model, TP=2 PP=2
#   DRY_RUN=1 bash examples/opt/ckpt_convert_opt_1_3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/opt-1.3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/opt-1_3b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=opt

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=opt HF_CONFIG='{"activation_function": "relu", "do_layer_norm_before": true, "enable_bias": true, "layer_norm_elementwise_affine": true, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_hf2mcore
