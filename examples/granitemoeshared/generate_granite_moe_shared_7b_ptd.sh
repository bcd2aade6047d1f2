#!/usr/bin/env bash
# Generate text with moe-7b-1b-active-shared-experts: sizes UNVERIFIED (no copy of its config.json was found): transformers' GraniteMoeSharedConfig() defaults, which its docstring likens to this checkpoint, with an assumed shared expert of 1024: 32 layers, hidden 4096, 32 heads, vocab 32000, rope theta 10000, RMSNorm 1e-6, untied; 8 experts of FFN 11008, top-2, one ungated shared expert of 1024; multipliers 1 (attention scale 1.0, not 1/sqrt(head dim)).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=2 PP=2 EP=4 (the layout of ckpt_convert_granite_moe_shared_7b_hf2mcore.sh), bf16.
#   bash examples/granitemoeshared/generate_granite_moe_shared_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granitemoeshared/generate_granite_moe_shared_7b_ptd.sh     # seconds on the CPU: a tiny random granitemoeshared model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/granitemoeshared/generate_granite_moe_shared_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/moe-7b-1b-active-shared-experts-mcore-tp2pp2ep4}    # ckpt_convert_granite_moe_shared_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/moe-7b-1b-active-shared-experts}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granitemoeshared HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "shared_intermediate_size": 1024, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0, "logits_scaling": 1.0, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
