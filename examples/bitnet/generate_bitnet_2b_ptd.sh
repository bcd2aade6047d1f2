#!/usr/bin/env bash
# Generate text with bitnet-b1.58-2B-4T-bf16 (microsoft/bitnet-b1.58-2B-4T-bf16 config.json): 30 layers, hidden 2560, FFN 6912, 20 heads / 5 KV heads, vocab 128256, rope theta 500000, RMSNorm 1e-5, RMSNorm on the attention context before o_proj and on the activation before down_proj, gated ReLU-squared MLP, no biases, tied embeddings; trained unquantised (no ternary weights in the forward).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_bitnet_2b_hf2mcore.sh), bf16.
#   bash examples/bitnet/generate_bitnet_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bitnet/generate_bitnet_2b_ptd.sh     # seconds on the CPU: a tiny random bitnet model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/bitnet/generate_bitnet_2b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/bitnet-2b-mcore-tp1pp1}    # ckpt_convert_bitnet_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bitnet-b1.58-2B-4T-bf16}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bitnet HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_generate
