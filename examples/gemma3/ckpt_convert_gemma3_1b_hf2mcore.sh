#!/usr/bin/env bash
# Convert gemma-3-1b-pt from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_gemma3_1b_ptd.sh).
#   bash examples/gemma3/ckpt_convert_gemma3_1b_hf2mcore.sh
#   SMOKE=1 bash examples/gemma3/ckpt_convert_gemma3_1b_hf2mcore.sh   # a tiny random gemma3_text model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gemma3/ckpt_convert_gemma3_1b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gemma-3-1b-pt}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gemma3-1b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=gemma3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma3_text HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 8, "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0}, "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}, "rms_norm_eps": 1e-06, "tie_word_embeddings": true, "max_position_embeddings": 32768}'

recipe_hf2mcore
