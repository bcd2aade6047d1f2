#!/usr/bin/env bash
# Convert pythia-1.4b from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=1
# (the layout of pretrain_pythia_1_4b_ptd.sh).
#   bash examples/gpt_neox/ckpt_convert_pythia_1_4b_hf2mcore.sh
#   SMOKE=1 bash examples/gpt_neox/ckpt_convert_pythia_1_4b_hf2mcore.sh   # a tiny random gpt_neox model, TP=2 PP=2
#   DRY_RUN=1 bash examples/gpt_neox/ckpt_convert_pythia_1_4b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/pythia-1.4b}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/pythia-1-4b-mcore-tp2pp1}
TP=${TP:-2} PP=${PP:-1}
MODEL_TYPE_HF=gpt_neox

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neox HF_CONFIG='{"rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true, "attention_bias": true, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_hf2mcore
