#!/usr/bin/env bash
# Convert falcon-7b from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=4
# (the layout of pretrain_falcon_7b_ptd.sh).
#   bash examples/falcon/ckpt_convert_falcon_7b_hf2mcore.sh
#   SMOKE=1 bash examples/falcon/ckpt_convert_falcon_7b_hf2mcore.sh   # a tiny random falcon model, TP=2 PP=2
#   DRY_RUN=1 bash examples/falcon/ckpt_convert_falcon_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/falcon-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/falcon-7b-mcore-tp1pp4}
TP=${TP:-1} PP=${PP:-4}
MODEL_TYPE_HF=falcon

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon HF_CONFIG='{"num_attention_heads": 4, "multi_query": true, "new_decoder_architecture": false, "parallel_attn": true, "bias": false, "alibi": false, "activation": "gelu", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_hf2mcore
