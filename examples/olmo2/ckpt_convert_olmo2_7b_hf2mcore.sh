#!/usr/bin/env bash
# Convert OLMo-2-1124-7B from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_olmo2_7b_ptd.sh).
#   bash examples/olmo2/ckpt_convert_olmo2_7b_hf2mcore.sh
#   SMOKE=1 bash examples/olmo2/ckpt_convert_olmo2_7b_hf2mcore.sh   # a tiny random olmo2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/olmo2/ckpt_convert_olmo2_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/OLMo-2-1124-7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/olmo2-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=olmo2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo2 HF_CONFIG='{"rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_hf2mcore
