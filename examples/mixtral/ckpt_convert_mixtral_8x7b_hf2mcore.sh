#!/usr/bin/env bash
# Convert Mixtral-8x7B-v0.1 from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=4
# (the layout of pretrain_mixtral_8x7b_ptd.sh).
#   bash examples/mixtral/ckpt_convert_mixtral_8x7b_hf2mcore.sh
#   SMOKE=1 bash examples/mixtral/ckpt_convert_mixtral_8x7b_hf2mcore.sh   # a tiny random mixtral model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/mixtral/ckpt_convert_mixtral_8x7b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Mixtral-8x7B-v0.1}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mixtral-8x7b-mcore-tp2pp2ep4}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}
MODEL_TYPE_HF=mixtral

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mixtral HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
