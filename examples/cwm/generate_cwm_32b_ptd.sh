#!/usr/bin/env bash
# Generate text with cwm (facebook/cwm config.json; see examples/README.md): 64 layers, hidden 6144, FFN 21504, 48 heads / 8 KV heads, vocab 128256, rope theta 1e6 with llama3 scaling (factor 16, low 1, high 4, original 8192), sliding window 8192 on every layer but 0, 4, ..., 60, RMSNorm 1e-5, no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 (the layout of ckpt_convert_cwm_32b_hf2mcore.sh), bf16.
#   bash examples/cwm/generate_cwm_32b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cwm/generate_cwm_32b_ptd.sh     # seconds on the CPU: a tiny random cwm model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/cwm/generate_cwm_32b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/cwm-32b-mcore-tp8pp2}    # ckpt_convert_cwm_32b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/cwm}

TP=${TP:-8} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cwm HF_CONFIG='{"sliding_window": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 131072, "bos_token_id": 1, "eos_token_id": 2}'

recipe_generate
