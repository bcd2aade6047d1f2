#!/usr/bin/env bash
# Convert Phi-3.5-MoE-instruct from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=4 EP=1
# (the layout of pretrain_phi35_moe_42b_ptd.sh).
#   bash examples/phimoe/ckpt_convert_phi35_moe_42b_hf2mcore.sh
#   SMOKE=1 bash examples/phimoe/ckpt_convert_phi35_moe_42b_hf2mcore.sh   # a tiny random phimoe model, TP=2 PP=2
#   DRY_RUN=1 bash examples/phimoe/ckpt_convert_phi35_moe_42b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Phi-3.5-MoE-instruct}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/phi-3.5-moe-instruct-mcore-tp4pp4}
TP=${TP:-4} PP=${PP:-4} EP=${EP:-1}
MODEL_TYPE_HF=phimoe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phimoe HF_CONFIG='{"num_local_experts": 16, "num_experts_per_tok": 2, "router_jitter_noise": 0.01, "input_jitter_noise": 0.0, "router_aux_loss_coef": 0.001, "attention_bias": true, "lm_head_bias": true, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
