#!/usr/bin/env bash
# Generate text with LFM2-1.2B (LiquidAI/LFM2-1.2B): 16 layers, 10 gated short-convolution layers and 6 attention layers (full_attn_idxs [2, 5, 8, 10, 12, 14]), hidden 2048; attention 32 heads / 8 KV heads of 64 with per-head q/k RMSNorm, rope theta 1000000; short conv of width 3 (conv_L_cache) without biases; SwiGLU FFN 8192 (block_ff_dim 12288 adjusted as Lfm2MLP does: 2/3 of it, times block_ffn_dim_multiplier 1.0, rounded up to a multiple of 256); RMSNorm 1e-5, vocab 65536, tied embeddings, 128000 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_lfm2_1_2b_hf2mcore.sh), bf16.
#   bash examples/lfm2/generate_lfm2_1_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/lfm2/generate_lfm2_1_2b_ptd.sh     # seconds on the CPU: a tiny random lfm2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/lfm2/generate_lfm2_1_2b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/lfm2-1.2b-mcore-tp1pp1}    # ckpt_convert_lfm2_1_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-1.2B}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=lfm2 HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["conv", "conv", "full_attention", "conv"], "conv_L_cache": 3, "conv_bias": false, "block_auto_adjust_ff_dim": false, "norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": true, "max_position_embeddings": 128000}'

recipe_generate
