#!/usr/bin/env bash
# Convert GLM-4.5-Air from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=16
# (the layout of pretrain_glm45_air_106b_ptd.sh).
#   bash examples/glm4_moe/ckpt_convert_glm45_air_106b_hf2mcore.sh
#   SMOKE=1 bash examples/glm4_moe/ckpt_convert_glm45_air_106b_hf2mcore.sh   # a tiny random glm4_moe model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/glm4_moe/ckpt_convert_glm45_air_106b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/GLM-4.5-Air}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/glm45-air-106b-mcore-tp2pp2ep16}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
MODEL_TYPE_HF=glm45

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4_moe HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": true, "attention_bias": true, "use_qk_norm": false, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
