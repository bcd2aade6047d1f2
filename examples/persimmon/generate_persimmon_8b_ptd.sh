#!/usr/bin/env bash
# Generate text with persimmon-8b-base (adept/persimmon-8b-base config.json): 36 layers, hidden 4096, FFN 16384, 64 heads (MHA), vocab 262144, rope theta 25000 on the first half of each head's dims, sequential LayerNorm (bias, 1e-5) layers, per-head q/k LayerNorms with bias, biases on every linear, ReLU squared, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_persimmon_8b_hf2mcore.sh), bf16.
#   bash examples/persimmon/generate_persimmon_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/persimmon/generate_persimmon_8b_ptd.sh     # seconds on the CPU: a tiny random persimmon model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/persimmon/generate_persimmon_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/persimmon-8b-mcore-tp8pp1}    # ckpt_convert_persimmon_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/persimmon-8b-base}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=persimmon HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.5, "rope_theta": 25000.0, "hidden_act": "relu2", "layer_norm_eps": 1e-05, "qk_layernorm": true, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_generate
