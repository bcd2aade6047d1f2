#!/usr/bin/env bash
# Convert MiniMax-M2 from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=2 EP=64
# (the layout of pretrain_minimax_m2_230b_ptd.sh).
#   bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_hf2mcore.sh
#   SMOKE=1 bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_hf2mcore.sh   # a tiny random minimax_m2 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/minimax_m2/ckpt_convert_minimax_m2_230b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/MiniMax-M2}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/minimax-m2-230b-mcore-tp1pp2ep64}
TP=${TP:-1} PP=${PP:-2} EP=${EP:-64}
MODEL_TYPE_HF=minimax_m2

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minimax_m2 HF_CONFIG='{"num_local_experts": 256, "num_experts_per_tok": 8, "intermediate_size": 32, "head_dim": 16, "rotary_dim": 8, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "tie_word_embeddings": false, "max_position_embeddings": 196608, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
