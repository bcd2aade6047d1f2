#!/usr/bin/env bash
# Convert Qwen3-Next-80B-A3B from Hugging Face safetensors (transformers' Qwen3NextForCausalLM layout, model_type
# qwen3_next) to our Megatron (mcore) layout at TP=1 PP=4 EP=8 (the layout of pretrain_qwen3_next_80b_a3b_ptd.sh);
# the layer pattern, DeltaNet, attention and MoE sizes are read from its config.json.
#   bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_hf2mcore.sh
#   SMOKE=1 bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_hf2mcore.sh   # a tiny random qwen3_next model (3 DeltaNet layers, attention), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/qwen3_next/ckpt_convert_qwen3_next_80b_a3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Qwen3-Next-80B-A3B-Instruct}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/qwen3-next-80b-a3b-mcore-tp1pp4ep8}
TP=${TP:-1} PP=${PP:-4} EP=${EP:-8}
MODEL_TYPE_HF=qwen3-next

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (3 DeltaNet layers then one attention layer, as every 4 layers of the real model; value heads twice the key heads)
HF_MODEL_TYPE=qwen3_next HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 32, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "linear_num_key_heads": 4, "linear_num_value_heads": 8, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
