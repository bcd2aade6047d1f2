#!/usr/bin/env bash
# Convert moe-7b-1b-active-shared-experts from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=4
# (the layout of pretrain_granite_moe_shared_7b_ptd.sh).
#   bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_hf2mcore.sh
#   SMOKE=1 bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_hf2mcore.sh   # a tiny random granitemoeshared model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/granitemoeshared/ckpt_convert_granite_moe_shared_7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/moe-7b-1b-active-shared-experts}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/moe-7b-1b-active-shared-experts-mcore-tp2pp2ep4}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}
MODEL_TYPE_HF=granitemoeshared

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoeshared HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 1024, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0, "logits_scaling": 1.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
