#!/usr/bin/env bash
# Generate text with Mamba2-2.7B (state-spaces/mamba2-2.7b): 64 Mamba2 layers (no attention, no MLP), hidden 2560, d_inner 5120 (expand 2) in 80 heads of 64, 1 B/C group, state 128, conv 4, SSD chunk 256, vocab 50288, RMSNorm 1e-5, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_mamba2_27b_hf2mcore.sh), bf16.
#   bash examples/mamba2/generate_mamba2_27b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mamba2/generate_mamba2_27b_ptd.sh     # seconds on the CPU: a tiny random mamba2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mamba2/generate_mamba2_27b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mamba2-2.7b-mcore-tp2pp1}    # ckpt_convert_mamba2_27b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mamba2-2.7b}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mamba2 HF_CONFIG='{"num_heads": 2, "head_dim": 64, "n_groups": 1, "state_size": 128, "expand": 2, "conv_kernel": 4, "chunk_size": 256, "use_bias": false, "use_conv_bias": true, "layer_norm_epsilon": 1e-05, "residual_in_fp32": true, "tie_word_embeddings": true}'

recipe_generate
