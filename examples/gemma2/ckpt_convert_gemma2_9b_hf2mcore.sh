#!/usr/bin/env bash
# Convert gemma-2-9b from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_gemma2_9b_ptd.sh).
#   bash examples/gemma2/ckpt_convert_gemma2_9b_hf2mcore.sh
#   SMOKE=1 bash examples/gemma2/ckpt_convert_gemma2_9b_hf2mcore.sh   # a tiny random gemma2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gemma2/ckpt_convert_gemma2_9b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gemma-2-9b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gemma2-9b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=gemma2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma2 HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_hf2mcore
