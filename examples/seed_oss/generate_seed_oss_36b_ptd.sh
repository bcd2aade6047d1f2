#!/usr/bin/env bash
# Generate text with Seed-OSS-36B-Base (ByteDance-Seed/Seed-OSS-36B-Base config.json; see examples/README.md): 64 layers, hidden 5120, FFN 27648, 80 heads / 8 KV heads, head dim 128, vocab 155136, rope theta 1e7, RMSNorm 1e-6, q/k/v bias only (attention_bias; no o_proj or MLP bias), untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 (the layout of ckpt_convert_seed_oss_36b_hf2mcore.sh), bf16.
#   bash examples/seed_oss/generate_seed_oss_36b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/seed_oss/generate_seed_oss_36b_ptd.sh     # seconds on the CPU: a tiny random seed_oss model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/seed_oss/generate_seed_oss_36b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/seed-oss-36b-mcore-tp8pp2}    # ckpt_convert_seed_oss_36b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Seed-OSS-36B-Base}

TP=${TP:-8} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=seed_oss HF_CONFIG='{"attention_bias": true, "attention_out_bias": false, "mlp_bias": false, "rms_norm_eps": 1e-06, "rope_theta": 10000000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 524288, "attention_dropout": 0.0, "residual_dropout": 0.0}'

recipe_generate
