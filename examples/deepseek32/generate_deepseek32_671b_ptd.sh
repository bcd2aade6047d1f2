#!/usr/bin/env bash
# Generate text with DeepSeek-V3.2-Exp (deepseek-ai/DeepSeek-V3.2-Exp config.json; see examples/README.md): DeepSeek-V3 with DeepSeek Sparse Attention (a lightning indexer of 64 heads of 128 keeps each query's top-2048 keys; half-split indexer RoPE); 61 layers, hidden 7168, dense FFN 18432 (first 3 layers), 128 heads (MLA: q latent 1536, kv latent 512, q/k 128 + rope 64, v 128), vocab 129280, rope theta 10000 with YaRN (factor 40, original 4096, mscale 1 / 1), interleaved RoPE, RMSNorm 1e-6, untied; 256 experts of FFN 2048, top-8 (sigmoid with the aux-loss-free expert bias, 8 groups of which 4 are kept, a group scored by its best two, renormalised, times 2.5), 1 shared expert, sequence aux loss 0.001.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 32 node(s) x 8 devices, TP=1 PP=8 EP=32 ETP=1 NUM_LAYER_LIST=8,8,8,8,8,7,7,7 (ckpt_convert_deepseek32_671b_hf2mcore.sh at TP=1: inference.py loads a TP 1 conversion: whole experts over TP ranks (ETP=1) need sequence parallelism, which a one-token decode step cannot split), bf16.
#   bash examples/deepseek32/generate_deepseek32_671b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek32/generate_deepseek32_671b_ptd.sh     # seconds on the CPU: a tiny random deepseek_v32 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/deepseek32/generate_deepseek32_671b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-32}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/deepseek32-671b-mcore-tp1pp8ep32}    # ckpt_convert_deepseek32_671b_hf2mcore.sh run with TP=1 CKPT_SAVE_DIR=./model_weights/deepseek32-671b-mcore-tp1pp8ep32
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V3.2-Exp}

TP=${TP:-1} PP=${PP:-8} EP=${EP:-32} ETP=1 NUM_LAYER_LIST=8,8,8,8,8,7,7,7

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v32 HF_CONFIG='{"n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 8, "topk_group": 4, "norm_topk_prob": true, "routed_scaling_factor": 2.5, "num_nextn_predict_layers": 1, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 8, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 163840, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP" ${ETP:+--expert-tensor-parallel-size "$ETP"} ${NUM_LAYER_LIST:+--num-layer-list "$NUM_LAYER_LIST"}
ARGS

recipe_generate
