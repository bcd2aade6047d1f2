#!/usr/bin/env bash
# Convert Qwen3-30B-A3B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=2 EP=8
# (the layout of pretrain_qwen3_moe_30b_a3b_ptd.sh).
#   bash examples/qwen3_moe/ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen3_moe/ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh   # a tiny random qwen3_moe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/qwen3_moe/ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen3-30B-A3B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen3-moe-30b-a3b-mcore-tp1pp2ep8}
TP=${TP:-1} PP=${PP:-2} EP=${EP:-8}
MODEL_TYPE_HF=qwen3_moe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3_moe HF_CONFIG='{"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
