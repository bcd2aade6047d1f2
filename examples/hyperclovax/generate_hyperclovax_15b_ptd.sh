#!/usr/bin/env bash
# Generate text with HyperCLOVAX-SEED-Text-Instruct-1.5B (naver-hyperclovax/HyperCLOVAX-SEED-Text-Instruct-1.5B config.json): 24 layers, hidden 2048, FFN 7168, 16 heads / 8 KV heads, vocab 110592, rope theta 50000000, RMSNorm 1e-5 before and after attention and MLP (peri-norm, use_post_norm), SwiGLU, no biases, Granite-style multipliers all 1 (attention scale 128^-0.5), untied embeddings (sizes unverified: see examples/README.md).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_hyperclovax_15b_hf2mcore.sh), bf16.
#   bash examples/hyperclovax/generate_hyperclovax_15b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hyperclovax/generate_hyperclovax_15b_ptd.sh     # seconds on the CPU: a tiny random hyperclovax model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/hyperclovax/generate_hyperclovax_15b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hyperclovax-15b-mcore-tp1pp1}    # ckpt_convert_hyperclovax_15b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HyperCLOVAX-SEED-Text-Instruct-1.5B}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hyperclovax HF_CONFIG='{"use_post_norm": true, "rms_norm_eps": 1e-05, "rope_theta": 50000000.0, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_generate
