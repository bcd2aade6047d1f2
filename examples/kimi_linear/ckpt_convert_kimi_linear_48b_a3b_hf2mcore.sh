#!/usr/bin/env bash
# Convert Kimi-Linear-48B-A3B from Hugging Face safetensors (Moonshot's layout, model_type kimi_linear: the dense
# MLP under mlp. or, as transformers saves it, block_sparse_moe.) to our Megatron (mcore) layout at TP=1 PP=3 EP=8
# (the layout of pretrain_kimi_linear_48b_a3b_ptd.sh); the layer pattern, KDA, MLA and MoE sizes are read from its
# config.json (linear_attn_config included).
#   bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh
#   SMOKE=1 bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh   # a tiny random kimi_linear model (3 KDA layers, MLA), TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/kimi_linear/ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Kimi-Linear-48B-A3B-Instruct}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/kimi-linear-48b-a3b-mcore-tp1pp3ep8}
TP=${TP:-1} PP=${PP:-3} EP=${EP:-8}
MODEL_TYPE_HF=kimi-linear

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
# (3 KDA layers then one MLA layer, as every 4 layers of the real model)
HF_MODEL_TYPE=kimi_linear HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_attn_config": {"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4}, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_renormalize": true, "routed_scaling_factor": 2.446, "num_expert_group": 1, "topk_group": 1, "mla_use_nope": true, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "model_max_length": 1048576, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
