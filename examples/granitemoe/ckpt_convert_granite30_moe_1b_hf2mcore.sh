#!/usr/bin/env bash
# Convert granite-3.0-1b-a400m-base from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=8
# (the layout of pretrain_granite30_moe_1b_ptd.sh).
#   bash examples/granitemoe/ckpt_convert_granite30_moe_1b_hf2mcore.sh
#   SMOKE=1 bash examples/granitemoe/ckpt_convert_granite30_moe_1b_hf2mcore.sh   # a tiny random granitemoe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/granitemoe/ckpt_convert_granite30_moe_1b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/granite-3.0-1b-a400m-base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/granite-3.0-1b-a400m-base-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
MODEL_TYPE_HF=granitemoe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoe HF_CONFIG='{"num_local_experts": 32, "num_experts_per_tok": 8, "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 6.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
