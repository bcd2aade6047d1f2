#!/usr/bin/env bash
# Generate text with Llama-3.1-8B (meta-llama/Llama-3.1-8B config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling (factor 8), RMSNorm 1e-5, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_llama31_8b_hf2mcore.sh), bf16.
#   bash examples/llama3/generate_llama31_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/generate_llama31_8b_ptd.sh     # seconds on the CPU: a tiny random llama model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/llama3/generate_llama31_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/llama31-8b-mcore-tp8pp1}    # ckpt_convert_llama31_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_generate
