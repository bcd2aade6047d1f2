#!/usr/bin/env bash
# Generate text with FalconMamba-7B (tiiuae/falcon-mamba-7b): 64 Mamba layers (no attention, no MLP), hidden 4096, d_inner 8192 (expand 2), state 16, conv 4, dt rank 256, weightless RMS norms on dt, B and C (eps 1e-6), vocab 65024, RMSNorm 1e-5, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_falcon_mamba_7b_hf2mcore.sh), bf16.
#   bash examples/falcon_mamba/generate_falcon_mamba_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon_mamba/generate_falcon_mamba_7b_ptd.sh     # seconds on the CPU: a tiny random falcon_mamba model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/falcon_mamba/generate_falcon_mamba_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/falcon-mamba-7b-mcore-tp4pp1}    # ckpt_convert_falcon_mamba_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-mamba-7b}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon_mamba HF_CONFIG='{"state_size": 16, "expand": 16, "conv_kernel": 4, "time_step_rank": 256, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-05, "mixer_rms_eps": 1e-06, "residual_in_fp32": true, "tie_word_embeddings": false}'

recipe_generate
