#!/usr/bin/env bash
# Generate text with EXAONE-4.0-32B (LGAI-EXAONE/EXAONE-4.0-32B config.json): 64 layers, hidden 5120, FFN 27392, 40 heads / 8 KV heads (head dim 128), vocab 102400, rope theta 1000000 with llama3 scaling (factor 16, original 8192) on the sliding-window layers only, RMSNorm 1e-5 after attention and MLP only (no norms before them), per-head q/k RMSNorm, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers (layers 3, 7, ..., 63 attend fully and without RoPE), untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 (the layout of ckpt_convert_exaone4_32b_hf2mcore.sh), bf16.
#   bash examples/exaone4/generate_exaone4_32b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/exaone4/generate_exaone4_32b_ptd.sh     # seconds on the CPU: a tiny random exaone4 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/exaone4/generate_exaone4_32b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/exaone4-32b-mcore-tp8pp2}    # ckpt_convert_exaone4_32b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/EXAONE-4.0-32B}

TP=${TP:-8} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=exaone4 HF_CONFIG='{"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"], "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 131072}'

recipe_generate
