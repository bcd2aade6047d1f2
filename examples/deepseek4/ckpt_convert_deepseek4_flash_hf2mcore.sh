#!/usr/bin/env bash
# Convert DeepSeek-V4-Flash from Hugging Face safetensors to our Megatron (mcore) layout at TP=4 PP=4 EP=32 (whole experts, ETP=1), 11,11,11,10 layers per stage
# (the layout of pretrain_deepseek4_flash_ptd.sh). The released checkpoint is FP8/FP4 (quantization_config): the
# converter dequantises it to fp32 on import, tensor by tensor; a bf16 export converts too. Its MTP layer (mtp.*,
# num_nextn_predict_layers 1) converts as --mtp-num-layers 1; a copy saved by transformers (which drops mtp.*)
# converts without it.
#   bash examples/deepseek4/ckpt_convert_deepseek4_flash_hf2mcore.sh
#   SMOKE=1 bash examples/deepseek4/ckpt_convert_deepseek4_flash_hf2mcore.sh   # a tiny random deepseek_v4 model, TP=2 PP=2 EP=2
#   DRY_RUN=1 bash examples/deepseek4/ckpt_convert_deepseek4_flash_hf2mcore.sh   # print the command only
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_from_hf/DeepSeek-V4-Flash-Base}
CKPT_SAVE_DIR=${CKPT_SAVE_DIR:-./model_weights/deepseek4-flash-mcore-tp4pp4ep32}
TP=${TP:-4} PP=${PP:-4} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=${NUM_LAYER_LIST-11,11,11,10}
MODEL_TYPE_HF=deepseek4

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v4 HF_CONFIG='{"n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 32, "head_dim": 32, "q_lora_rank": 48, "num_key_value_heads": 1, "partial_rotary_factor": 0.125, "sliding_window": 8, "o_groups": 2, "o_lora_rank": 16, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 8, "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}, "hc_mult": 4, "hc_sinkhorn_iters": 20, "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "num_hash_layers": 1, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 1048576, "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "rope_parameters": {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 65536, "beta_fast": 32.0, "beta_slow": 1.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --target-expert-parallel-size "$EP" --target-expert-tensor-parallel-size "$ETP" ${NUM_LAYER_LIST:+--num-layer-list "$NUM_LAYER_LIST"}
ARGS

recipe_hf2mcore
