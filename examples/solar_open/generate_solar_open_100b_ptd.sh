#!/usr/bin/env bash
# Generate text with Solar-Open-100B (upstage/Solar-Open-100B config.json): 48 layers, all MoE, hidden 4096, 64 heads / 8 KV heads of dim 128, vocab 196608, rope theta 1000000, RMSNorm 1e-5, no biases, untied; 128 experts of FFN 1280, top-8 by sigmoid score + expert bias, renormalised, routed_scaling_factor 1.0, one shared expert of 1280 (--ffn-hidden-size 1280: no layer is dense).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 8 node(s) x 8 devices, TP=2 PP=2 EP=16 (the layout of ckpt_convert_solar_open_100b_hf2mcore.sh), bf16.
#   bash examples/solar_open/generate_solar_open_100b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/solar_open/generate_solar_open_100b_ptd.sh     # seconds on the CPU: a tiny random solar_open model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/solar_open/generate_solar_open_100b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/solar-open-100b-mcore-tp2pp2ep16}    # ckpt_convert_solar_open_100b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Solar-Open-100B}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=solar_open HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": true, "attention_bias": false, "head_dim": 16, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
