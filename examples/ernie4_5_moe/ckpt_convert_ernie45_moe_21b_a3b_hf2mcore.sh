#!/usr/bin/env bash
# Convert ERNIE-4.5-21B-A3B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=8
# (the layout of pretrain_ernie45_moe_21b_a3b_ptd.sh).
#   bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh
#   SMOKE=1 bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh   # a tiny random ernie4_5_moe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/ernie4_5_moe/ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/ERNIE-4.5-21B-A3B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/ernie45-moe-21b-a3b-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
MODEL_TYPE_HF=ernie4_5_moe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ernie4_5_moe HF_CONFIG='{"moe_num_experts": 64, "moe_k": 6, "moe_intermediate_size": 32, "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_end_index": -1, "moe_layer_interval": 1, "use_bias": false, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
