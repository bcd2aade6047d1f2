#!/usr/bin/env bash
# Convert gpt_bigcode-santacoder from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_santacoder_1b_ptd.sh).
#   bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_hf2mcore.sh   # a tiny random gpt_bigcode model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gpt_bigcode/ckpt_convert_santacoder_1b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt_bigcode-santacoder}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/santacoder-1b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=gpt_bigcode

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_bigcode HF_CONFIG='{"multi_query": true, "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 2048}'

recipe_hf2mcore
