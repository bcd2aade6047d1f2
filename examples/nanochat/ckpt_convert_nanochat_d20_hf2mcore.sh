#!/usr/bin/env bash
# Convert nanochat-d20 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_nanochat_d20_ptd.sh).
#   bash examples/nanochat/ckpt_convert_nanochat_d20_hf2mcore.sh
#   SMOKE=1 bash examples/nanochat/ckpt_convert_nanochat_d20_hf2mcore.sh   # a tiny random nanochat model, TP=2 PP=2
#   DRY_RUN=1 bash examples/nanochat/ckpt_convert_nanochat_d20_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/nanochat-d20}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/nanochat-d20-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=nanochat

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nanochat HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-06, "final_logit_softcapping": 15.0, "attention_bias": false, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_hf2mcore
