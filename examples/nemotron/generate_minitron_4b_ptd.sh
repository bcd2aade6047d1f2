#!/usr/bin/env bash
# Generate text with Minitron-4B-Base (nvidia/Minitron-4B-Base (Nemotron-4 architecture): 32 layers, hidden 3072, FFN 9216, 32 heads / 8 KV heads, head dim 128, vocab 256000, rope theta 10000 on half of each head (partial_rotary_factor 0.5), LayerNorm1P 1e-5 (scale 1 + weight, with bias), non-gated ReLU-squared MLP, no linear biases, untied embeddings, 4096 positions (see examples/README.md for which numbers are verified)).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_minitron_4b_hf2mcore.sh), bf16.
#   bash examples/nemotron/generate_minitron_4b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/nemotron/generate_minitron_4b_ptd.sh     # seconds on the CPU: a tiny random nemotron model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/nemotron/generate_minitron_4b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minitron-4b-mcore-tp4pp1}    # ckpt_convert_minitron_4b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Minitron-4B-Base}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=nemotron HF_CONFIG='{"num_key_value_heads": 2, "head_dim": 32, "hidden_act": "relu2", "norm_eps": 1e-05, "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "attention_bias": false, "mlp_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_generate
