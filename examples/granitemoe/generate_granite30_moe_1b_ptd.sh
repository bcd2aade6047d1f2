#!/usr/bin/env bash
# Generate text with granite-3.0-1b-a400m-base: 24 layers, hidden 1024, 16 heads / 8 KV heads, vocab 49155, rope theta 10000, RMSNorm 1e-6, tied embeddings; 32 experts of FFN 512, top-8 (softmax over the top-8 logits); embeddings x 12, residual branches x 0.22, attention scale 0.015625, logits / 6.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (the layout of ckpt_convert_granite30_moe_1b_hf2mcore.sh), bf16.
#   bash examples/granitemoe/generate_granite30_moe_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoe/generate_granite30_moe_1b_ptd.sh     # seconds on the CPU: a tiny random granitemoe model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/granitemoe/generate_granite30_moe_1b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/granite-3.0-1b-a400m-base-mcore-tp1pp1ep8}    # ckpt_convert_granite30_moe_1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.0-1b-a400m-base}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoe HF_CONFIG='{"num_local_experts": 32, "num_experts_per_tok": 8, "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 6.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
