#!/usr/bin/env bash
# Generate text with FlexOlmo-7x7B-1T: transformers' FlexOlmoConfig() defaults, whose docstring names this checkpoint: 32 layers, hidden 4096, 32 heads / 32 KV heads, vocab 100352, rope theta 500000, RMSNorm 1e-6, untied; norms after attention and MLP only, q/k RMSNorm over all heads' channels; 7 experts of FFN 11008, top-5 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 EP=1 (the layout of ckpt_convert_flexolmo_7x7b_hf2mcore.sh), bf16.
#   bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh     # seconds on the CPU: a tiny random flex_olmo model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/flexolmo-7x7b-1t-mcore-tp8pp2}    # ckpt_convert_flexolmo_7x7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/FlexOlmo-7x7B-1T}

TP=${TP:-8} PP=${PP:-2} EP=${EP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=flex_olmo HF_CONFIG='{"num_experts": 7, "num_experts_per_tok": 5, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "pad_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
