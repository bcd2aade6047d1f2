#!/usr/bin/env bash
# Generate text with SantaCoder 1.1B (bigcode/gpt_bigcode-santacoder config.json): 24 layers, hidden 2048, FFN 8192, 16 heads with one shared KV head (multi_query), vocab 49280, 2048 learned positions, LayerNorm (eps 1e-5), GELU (tanh), biases on every linear, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_santacoder_1b_hf2mcore.sh), bf16.
#   bash examples/gpt_bigcode/generate_santacoder_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_bigcode/generate_santacoder_1b_ptd.sh     # seconds on the CPU: a tiny random gpt_bigcode model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gpt_bigcode/generate_santacoder_1b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/santacoder-1b-mcore-tp2pp1}    # ckpt_convert_santacoder_1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt_bigcode-santacoder}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_bigcode HF_CONFIG='{"multi_query": true, "activation_function": "gelu_pytorch_tanh", "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 2048}'

recipe_generate
