#!/usr/bin/env bash
# Generate text with Qwen3-8B (Qwen/Qwen3-8B config.json): 36 layers, hidden 4096, FFN 12288, 32 heads / 8 KV heads, head dim 128, vocab 151936, rope theta 1000000, RMSNorm 1e-6, per-head q/k RMSNorm, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_qwen3_8b_hf2mcore.sh), bf16.
#   bash examples/qwen3/generate_qwen3_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3/generate_qwen3_8b_ptd.sh     # seconds on the CPU: a tiny random qwen3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/qwen3/generate_qwen3_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-8b-mcore-tp8pp1}    # ckpt_convert_qwen3_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3 HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'

recipe_generate
