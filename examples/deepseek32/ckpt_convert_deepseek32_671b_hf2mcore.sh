#!/usr/bin/env bash
# Convert DeepSeek-V3.2-Exp from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=8 EP=32 (whole experts, ETP=1), 8,8,8,8,8,7,7,7 layers per stage
# (the layout of pretrain_deepseek32_671b_ptd.sh).
#   bash examples/deepseek32/ckpt_convert_deepseek32_671b_hf2mcore.sh
#   SMOKE=1 bash examples/deepseek32/ckpt_convert_deepseek32_671b_hf2mcore.sh   # a tiny random deepseek_v32 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/deepseek32/ckpt_convert_deepseek32_671b_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/DeepSeek-V3.2-Exp}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/deepseek32-671b-mcore-tp4pp8ep32}
TP=${TP:-4} PP=${PP:-8} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=${NUM_LAYER_LIST-8,8,8,8,8,7,7,7}
MODEL_TYPE_HF=deepseek32

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v32 HF_CONFIG='{"n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 8, "topk_group": 4, "norm_topk_prob": true, "routed_scaling_factor": 2.5, "num_nextn_predict_layers": 1, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 8, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 163840, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP" --target-expert-tensor-parallel-size "$ETP" ${NUM_LAYER_LIST:+--num-layer-list "$NUM_LAYER_LIST"}
ARGS

recipe_hf2mcore
