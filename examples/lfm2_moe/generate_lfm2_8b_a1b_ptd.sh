#!/usr/bin/env bash
# Generate text with LFM2-8B-A1B (LiquidAI/LFM2-8B-A1B): 24 layers, 18 gated short-convolution layers and 6 attention layers (layer_types: attention at 2, 6, 10, 14, 18, 21), hidden 2048; attention 32 heads / 8 KV heads of 64 with per-head q/k RMSNorm, rope theta 1000000; short conv of width 3 (conv_L_cache) without biases; the first 2 layers with a dense SwiGLU MLP of 7168 (num_dense_layers; intermediate_size, not adjusted), the other 22 a mixture of 32 experts of 1792 (top 4 by sigmoid score + expert bias, weighed by the unbiased scores renormalised, routed_scaling_factor 1.0, no shared expert); RMSNorm 1e-5, vocab 65536, tied embeddings, 128000 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (the layout of ckpt_convert_lfm2_8b_a1b_hf2mcore.sh), bf16.
#   bash examples/lfm2_moe/generate_lfm2_8b_a1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/lfm2_moe/generate_lfm2_8b_a1b_ptd.sh     # seconds on the CPU: a tiny random lfm2_moe model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/lfm2_moe/generate_lfm2_8b_a1b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/lfm2-8b-a1b-mcore-tp1pp1ep8}    # ckpt_convert_lfm2_8b_a1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/LFM2-8B-A1B}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=lfm2_moe HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["conv", "conv", "full_attention", "conv"], "conv_L_cache": 3, "conv_bias": false, "num_dense_layers": 2, "num_experts": 32, "num_experts_per_tok": 4, "moe_intermediate_size": 32, "use_expert_bias": true, "norm_topk_prob": true, "routed_scaling_factor": 1.0, "norm_eps": 1e-05, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}, "tie_word_embeddings": true, "max_position_embeddings": 128000}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
