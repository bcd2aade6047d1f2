#!/usr/bin/env bash
# Convert Mistral-Small-4-119B from Hugging Face safetensors to our Megatron (mcore) layout at TP=2 PP=2 EP=16
# (the layout of pretrain_mistral_small4_119b_ptd.sh).
#   bash examples/mistral4/ckpt_convert_mistral_small4_119b_hf2mcore.sh
#   SMOKE=1 bash examples/mistral4/ckpt_convert_mistral_small4_119b_hf2mcore.sh   # a tiny random mistral4 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/mistral4/ckpt_convert_mistral_small4_119b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/Mistral-Small-4-119B}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/mistral-small4-119b-mcore-tp2pp2ep16}
TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}
MODEL_TYPE_HF=mistral4

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mistral4 HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 4, "n_shared_experts": 1, "first_k_dense_replace": 0, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.0, "rope_interleave": true, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 1048576, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1, "partial_rotary_factor": 0.5}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP"
ARGS

recipe_hf2mcore
