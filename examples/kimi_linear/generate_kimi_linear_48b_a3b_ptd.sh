#!/usr/bin/env bash
# Generate text with Kimi-Linear-48B-A3B (moonshotai/Kimi-Linear-48B-A3B-Instruct): 27 layers, Kimi Delta Attention in all but the 1-based layers 4, 8, 12, 16, 20, 24 and 27, which are multi-latent attention without positions (mla_use_nope); hidden 2304; KDA 32 heads of 128 (key and value), a short conv of 4, low-rank forget and output gates; MLA 32 heads, kv_lora_rank 512, q from one projection, nope 128 / rope 64 (unrotated) / v 128; the first layer a dense SwiGLU MLP of 9216, then MoE: 256 experts of 1024, top-8 of the sigmoid scores with the selection bias, renormalised, times 2.446, one shared expert; RMSNorm 1e-5, vocab 163840, untied, 1048576 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 3 node(s) x 8 devices, TP=1 PP=3 EP=8 (the layout of ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh), bf16.
#   bash examples/kimi_linear/generate_kimi_linear_48b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/kimi_linear/generate_kimi_linear_48b_a3b_ptd.sh     # seconds on the CPU: a tiny random kimi_linear model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/kimi_linear/generate_kimi_linear_48b_a3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-3}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/kimi-linear-48b-a3b-mcore-tp1pp3ep8}    # ckpt_convert_kimi_linear_48b_a3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Kimi-Linear-48B-A3B-Instruct}

TP=${TP:-1} PP=${PP:-3} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=kimi_linear HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_attn_config": {"num_heads": 4, "head_dim": 16, "short_conv_kernel_size": 4}, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "num_experts": 256, "num_experts_per_token": 8, "num_shared_experts": 1, "moe_intermediate_size": 32, "first_k_dense_replace": 1, "moe_renormalize": true, "routed_scaling_factor": 2.446, "num_expert_group": 1, "topk_group": 1, "mla_use_nope": true, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "model_max_length": 1048576, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
