#!/usr/bin/env bash
# Convert starcoder2-3b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_starcoder2_3b_ptd.sh).
#   bash examples/starcoder2/ckpt_convert_starcoder2_3b_hf2mcore.sh
#   SMOKE=1 bash examples/starcoder2/ckpt_convert_starcoder2_3b_hf2mcore.sh   # a tiny random starcoder2 model, TP=2 PP=2
#   DRY_RUN=1 bash examples/starcoder2/ckpt_convert_starcoder2_3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/starcoder2-3b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/starcoder2-3b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=starcoder2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=starcoder2 HF_CONFIG='{"rope_theta": 999999.4420358813, "sliding_window": 8, "use_bias": true, "norm_epsilon": 1e-05, "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true, "max_position_embeddings": 16384}'

recipe_hf2mcore
