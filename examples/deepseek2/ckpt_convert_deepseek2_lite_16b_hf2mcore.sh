#!/usr/bin/env bash
# Convert DeepSeek-V2-Lite from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=8
# (the layout of pretrain_deepseek2_lite_16b_ptd.sh).
#   bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_hf2mcore.sh
#   SMOKE=1 bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_hf2mcore.sh   # a tiny random deepseek_v2 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/deepseek2/ckpt_convert_deepseek2_lite_16b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/DeepSeek-V2-Lite}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/deepseek2-lite-16b-mcore-tp1pp1ep8}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}
MODEL_TYPE_HF=deepseek2-lite

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v2 HF_CONFIG='{"n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "topk_method": "greedy", "n_group": 1, "topk_group": 1, "norm_topk_prob": false, "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 163840, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
