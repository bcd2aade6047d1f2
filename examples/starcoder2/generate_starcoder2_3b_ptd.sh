#!/usr/bin/env bash
# Generate text with starcoder2-3b (bigcode/starcoder2-3b config.json: 30 layers, hidden 3072, FFN 12288, 24 heads / 2 KV heads, vocab 49152, rope theta 999999.4420358813, sliding window 4096, LayerNorm 1e-5 with bias, non-gated tanh GELU MLP, biases on every linear (use_bias), tied embeddings, 16384 positions).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_starcoder2_3b_hf2mcore.sh), bf16.
#   bash examples/starcoder2/generate_starcoder2_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/starcoder2/generate_starcoder2_3b_ptd.sh     # seconds on the CPU: a tiny random starcoder2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/starcoder2/generate_starcoder2_3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/starcoder2-3b-mcore-tp2pp1}    # ckpt_convert_starcoder2_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/starcoder2-3b}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=starcoder2 HF_CONFIG='{"rope_theta": 999999.4420358813, "sliding_window": 8, "use_bias": true, "norm_epsilon": 1e-05, "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": true, "max_position_embeddings": 16384}'

recipe_generate
