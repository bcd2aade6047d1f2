#!/usr/bin/env bash
# Generate text with bloom-7b1 (bigscience/bloom-7b1 config.json: 30 layers, hidden 4096, FFN 16384 (4 x hidden), 32 heads (MHA), vocab 250880, ALiBi (no rotary), LayerNorm 1e-5 with bias, a LayerNorm on the word embeddings, Bloom's tanh GELU, biases on every linear, tied embeddings, sequence 2048).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_bloom_7b1_hf2mcore.sh), bf16.
#   bash examples/bloom/generate_bloom_7b1_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bloom/generate_bloom_7b1_ptd.sh     # seconds on the CPU: a tiny random bloom model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/bloom/generate_bloom_7b1_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/bloom-7b1-mcore-tp8pp1}    # ckpt_convert_bloom_7b1_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bloom-7b1}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bloom HF_CONFIG='{"layer_norm_epsilon": 1e-05, "apply_residual_connection_post_layernorm": false, "tie_word_embeddings": true}'

recipe_generate
