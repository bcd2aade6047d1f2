#!/usr/bin/env bash
# Convert Qwen3-0.6B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_qwen3_06b_ptd.sh).
#   bash examples/qwen3/ckpt_convert_qwen3_06b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen3/ckpt_convert_qwen3_06b_hf2mcore.sh   # a tiny random qwen3 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/qwen3/ckpt_convert_qwen3_06b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen3-0.6B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen3-06b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=qwen3

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3 HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": true, "max_position_embeddings": 40960}'

recipe_hf2mcore
