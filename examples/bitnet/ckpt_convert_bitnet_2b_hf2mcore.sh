#!/usr/bin/env bash
# Convert bitnet-b1.58-2B-4T-bf16 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_bitnet_2b_ptd.sh).
#   bash examples/bitnet/ckpt_convert_bitnet_2b_hf2mcore.sh
#   SMOKE=1 bash examples/bitnet/ckpt_convert_bitnet_2b_hf2mcore.sh   # a tiny random bitnet model, TP=2 PP=2
#   DRY_RUN=1 bash examples/bitnet/ckpt_convert_bitnet_2b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/bitnet-2b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=bitnet

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bitnet HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_hf2mcore
