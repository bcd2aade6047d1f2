#!/usr/bin/env bash
# Convert vaultgemma-1b from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1
# (the layout of pretrain_vaultgemma_1b_ptd.sh).
#   bash examples/vaultgemma/ckpt_convert_vaultgemma_1b_hf2mcore.sh
#   SMOKE=1 bash examples/vaultgemma/ckpt_convert_vaultgemma_1b_hf2mcore.sh   # a tiny random vaultgemma model, TP=2 PP=2
#   DRY_RUN=1 bash examples/vaultgemma/ckpt_convert_vaultgemma_1b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/vaultgemma-1b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/vaultgemma-1b-mcore-tp1pp1}
TP=${TP:-1} PP=${PP:-1}
MODEL_TYPE_HF=vaultgemma

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=vaultgemma HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": null, "final_logit_softcapping": null, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 1024}'

recipe_hf2mcore
