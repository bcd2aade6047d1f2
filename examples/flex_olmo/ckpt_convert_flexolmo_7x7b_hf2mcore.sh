#!/usr/bin/env bash
# Convert FlexOlmo-7x7B-1T from Hugging Face safetensors to our Megatron (mcore) layout at TP=8 PP=2 EP=1
# (the layout of pretrain_flexolmo_7x7b_ptd.sh).
#   bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_hf2mcore.sh
#   SMOKE=1 bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_hf2mcore.sh   # a tiny random flex_olmo model, TP=2 PP=2
#   DRY_RUN=1 bash examples/flex_olmo/ckpt_convert_flexolmo_7x7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/FlexOlmo-7x7B-1T}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/flexolmo-7x7b-1t-mcore-tp8pp2}
TP=${TP:-8} PP=${PP:-2} EP=${EP:-1}
MODEL_TYPE_HF=flex_olmo

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=flex_olmo HF_CONFIG='{"num_experts": 7, "num_experts_per_tok": 5, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "pad_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
