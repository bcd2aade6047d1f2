#!/usr/bin/env bash
# Generate text with Mixtral-8x7B-v0.1 (mistralai/Mixtral-8x7B-v0.1 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32000, rope theta 1000000, RMSNorm 1e-5, untied embeddings; 8 experts of FFN 14336, top-2 (softmax over the top-2 logits), router aux loss coefficient 0.02.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=2 PP=2 EP=4 (the layout of ckpt_convert_mixtral_8x7b_hf2mcore.sh), bf16.
#   bash examples/mixtral/generate_mixtral_8x7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mixtral/generate_mixtral_8x7b_ptd.sh     # seconds on the CPU: a tiny random mixtral model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mixtral/generate_mixtral_8x7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mixtral-8x7b-mcore-tp2pp2ep4}    # ckpt_convert_mixtral_8x7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mixtral-8x7B-v0.1}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mixtral HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
