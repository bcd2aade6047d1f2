#!/usr/bin/env bash
# Convert GLM-4-9B-0414 from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_glm4_0414_9b_ptd.sh).
#   bash examples/glm4/ckpt_convert_glm4_0414_9b_hf2mcore.sh
#   SMOKE=1 bash examples/glm4/ckpt_convert_glm4_0414_9b_hf2mcore.sh   # a tiny random glm4 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/glm4/ckpt_convert_glm4_0414_9b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/GLM-4-9B-0414}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/glm4-0414-9b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=glm4

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4 HF_CONFIG='{"partial_rotary_factor": 0.5, "attention_bias": true, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 32768, "pad_token_id": 0, "eos_token_id": 2}'

recipe_hf2mcore
