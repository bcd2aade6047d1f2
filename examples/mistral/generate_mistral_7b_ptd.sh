#!/usr/bin/env bash
# Generate text with Mistral-7B-v0.3 (mistralai/Mistral-7B-v0.3 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32768, rope theta 1000000, RMSNorm 1e-5, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_mistral_7b_hf2mcore.sh), bf16.
#   bash examples/mistral/generate_mistral_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral/generate_mistral_7b_ptd.sh     # seconds on the CPU: a tiny random mistral model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mistral/generate_mistral_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mistral-7b-mcore-tp8pp1}    # ckpt_convert_mistral_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mistral HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false}'

recipe_generate
