#!/usr/bin/env bash
# Generate text with glm-4-9b-chat-hf (THUDM/glm-4-9b-chat-hf config.json; see examples/README.md): 40 layers, hidden 4096, FFN 13696, 32 heads / 2 KV heads, vocab 151552, rope theta 10000 on the first half of each head in interleaved pairs, RMSNorm 1.5625e-7, q/k/v bias only, fused gate_up_proj, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_glm4_9b_hf2mcore.sh), bf16.
#   bash examples/glm/generate_glm4_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm/generate_glm4_9b_ptd.sh     # seconds on the CPU: a tiny random glm model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/glm/generate_glm4_9b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm4-9b-mcore-tp8pp1}    # ckpt_convert_glm4_9b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/glm-4-9b-chat-hf}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm HF_CONFIG='{"partial_rotary_factor": 0.5, "attention_bias": true, "rms_norm_eps": 1.5625e-07, "rope_theta": 10000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 131072, "pad_token_id": 0, "eos_token_id": 2}'

recipe_generate
