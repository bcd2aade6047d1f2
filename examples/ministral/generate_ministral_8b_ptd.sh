#!/usr/bin/env bash
# Generate text with Ministral-8B-Instruct-2410 (mistralai/Ministral-8B-Instruct-2410 config.json): 36 layers, hidden 4096, FFN 12288, 32 heads / 8 KV heads, head dim 128, vocab 131072, rope theta 100000000, RMSNorm 1e-5, untied embeddings; its sliding_window 32768 equals max positions, so no token is ever outside it (no window flag).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_ministral_8b_hf2mcore.sh), bf16.
#   bash examples/ministral/generate_ministral_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ministral/generate_ministral_8b_ptd.sh     # seconds on the CPU: a tiny random ministral model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/ministral/generate_ministral_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ministral-8b-mcore-tp8pp1}    # ckpt_convert_ministral_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-8B-Instruct-2410}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-05, "rope_theta": 100000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'

recipe_generate
