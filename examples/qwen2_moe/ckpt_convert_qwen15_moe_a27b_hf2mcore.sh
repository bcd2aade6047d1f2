#!/usr/bin/env bash
# Convert Qwen1.5-MoE-A2.7B from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=4
# (the layout of pretrain_qwen15_moe_a27b_ptd.sh).
#   bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_hf2mcore.sh   # a tiny random qwen2_moe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/qwen2_moe/ckpt_convert_qwen15_moe_a27b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen1.5-MoE-A2.7B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen15-moe-a27b-mcore-tp1pp1ep4}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-4}
MODEL_TYPE_HF=qwen2_moe

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen2_moe HF_CONFIG='{"num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "qkv_bias": true, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 8192}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
