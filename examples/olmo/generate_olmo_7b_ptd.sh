#!/usr/bin/env bash
# Generate text with OLMo-7B-hf (allenai/OLMo-7B-hf config.json = transformers' OlmoConfig() defaults): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 50304, rope theta 10000, LayerNorm without weight or bias (eps 1e-5), SwiGLU, no biases, no q/k/v clipping (clip_qkv null), untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_olmo_7b_hf2mcore.sh), bf16.
#   bash examples/olmo/generate_olmo_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo/generate_olmo_7b_ptd.sh     # seconds on the CPU: a tiny random olmo model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/olmo/generate_olmo_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo-7b-mcore-tp8pp1}    # ckpt_convert_olmo_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-7B-hf}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo HF_CONFIG='{"clip_qkv": null, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_generate
