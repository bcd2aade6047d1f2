#!/usr/bin/env bash
# Convert mpt-7b from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=1
# (the layout of pretrain_mpt_7b_ptd.sh).
#   bash examples/mpt/ckpt_convert_mpt_7b_hf2mcore.sh
#   SMOKE=1 bash examples/mpt/ckpt_convert_mpt_7b_hf2mcore.sh   # a tiny random mpt model, TP=2 PP=2
#   DRY_RUN=1 bash examples/mpt/ckpt_convert_mpt_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/mpt-7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mpt-7b-mcore-tp8pp1}
TP=${TP:-8} PP=${PP:-1}
MODEL_TYPE_HF=mpt

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mpt HF_CONFIG='{"max_seq_len": 2048, "no_bias": true, "layer_norm_epsilon": 1e-05, "attn_config": {"alibi": true, "alibi_bias_max": 8, "clip_qkv": null, "softmax_scale": null}, "tie_word_embeddings": true}'

recipe_hf2mcore
