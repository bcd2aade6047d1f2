#!/usr/bin/env bash
# Convert gpt-neox-japanese-2.7b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_gpt_neox_japanese_2_7b_ptd.sh).
#   bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh   # a tiny random gpt_neox_japanese model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gpt_neox_japanese/ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/gpt-neox-japanese-2.7b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/gpt-neox-japanese-2-7b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=gpt_neox_japanese

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neox_japanese HF_CONFIG='{"intermediate_multiple_size": 2, "rotary_pct": 1.0, "rotary_emb_base": 10000, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_hf2mcore
