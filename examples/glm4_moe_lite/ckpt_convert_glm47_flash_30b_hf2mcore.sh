#!/usr/bin/env bash
# Convert GLM-4.7-Flash from Hugging Face safetensors to our Megatron (mcore) layout at TP=1 PP=1 EP=16
# (the layout of pretrain_glm47_flash_30b_ptd.sh).
#   bash examples/glm4_moe_lite/ckpt_convert_glm47_flash_30b_hf2mcore.sh
#   SMOKE=1 bash examples/glm4_moe_lite/ckpt_convert_glm47_flash_30b_hf2mcore.sh   # a tiny random glm4_moe_lite model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/glm4_moe_lite/ckpt_convert_glm47_flash_30b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/GLM-4.7-Flash}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/glm47-flash-30b-mcore-tp1pp1ep16}
TP=${TP:-1} PP=${PP:-1} EP=${EP:-16}
MODEL_TYPE_HF=glm4_moe_lite

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4_moe_lite HF_CONFIG='{"n_routed_experts": 64, "num_experts_per_tok": 4, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"], "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.8, "rope_interleave": true, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 202752, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
