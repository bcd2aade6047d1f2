#!/usr/bin/env bash
# Convert gpt2 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_gpt2_124m_ptd.sh).
#   bash examples/gpt2/ckpt_convert_gpt2_124m_hf2mcore.sh
#   SMOKE=1 bash examples/gpt2/ckpt_convert_gpt2_124m_hf2mcore.sh   # a tiny random gpt2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gpt2/ckpt_convert_gpt2_124m_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt2}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gpt2-124m-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=gpt2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt2 HF_CONFIG='{"activation_function": "gelu_new", "n_inner": null, "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 1024}'

recipe_hf2mcore
