#!/usr/bin/env bash
# Generate text with ERNIE-4.5-0.3B-Base-PT (baidu/ERNIE-4.5-0.3B-Base-PT config.json; see examples/README.md): 18 layers, hidden 1024, FFN 3072, 16 heads / 2 KV heads, head dim 128, vocab 103424, rope theta 500000 on interleaved pairs, RMSNorm 1e-5, no biases (use_bias false), tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_ernie4_5_03b_hf2mcore.sh), bf16.
#   bash examples/ernie4_5/generate_ernie4_5_03b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ernie4_5/generate_ernie4_5_03b_ptd.sh     # seconds on the CPU: a tiny random ernie4_5 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/ernie4_5/generate_ernie4_5_03b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ernie4-5-03b-mcore-tp1pp1}    # ckpt_convert_ernie4_5_03b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ernie4_5 HF_CONFIG='{"use_bias": false, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "head_dim": 32, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_generate
