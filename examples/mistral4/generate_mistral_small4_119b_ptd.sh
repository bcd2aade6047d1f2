#!/usr/bin/env bash
# Generate text with Mistral-Small-4-119B (mistralai/Mistral-Small-4-119B-2603 (text model) config.json; see examples/README.md): 36 layers, hidden 4096, 32 heads (MLA: q latent 1024, kv latent 256, q/k 64 + rope 64, v 128), vocab 131072, rope theta 10000 with YaRN (factor 128, original 8192, beta 32 / 1, mscale 1 / 1) over the rope dims, interleaved RoPE, Llama-4 query temperature 0.1 per 8192 positions, RMSNorm 1e-6, untied; every layer MoE: 128 experts of FFN 2048, top-4 (softmax over all experts, renormalised), 1 shared expert.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (the layout of ckpt_convert_mistral_small4_119b_hf2mcore.sh), bf16.
#   bash examples/mistral4/generate_mistral_small4_119b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral4/generate_mistral_small4_119b_ptd.sh     # seconds on the CPU: a tiny random mistral4 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mistral4/generate_mistral_small4_119b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mistral-small4-119b-mcore-tp2pp2ep16}    # ckpt_convert_mistral_small4_119b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-Small-4-119B}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mistral4 HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 4, "n_shared_experts": 1, "first_k_dense_replace": 0, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.0, "rope_interleave": true, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 1048576, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 128.0, "original_max_position_embeddings": 8192, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1, "partial_rotary_factor": 0.5}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
