#!/usr/bin/env bash
# Generate text with Zamba-7B-v1 (Zyphra/Zamba-7B-v1): 76 Mamba1 layers, 13 of them (layers 2, 7, 13, ..., 67, 73) first running the one shared attention block on [hidden; word embeddings] (16 heads of 464 over 2 x 3712 channels, softmax scale (464/2)^-0.5, no positions; a GeGLU MLP of 14848) and a 3712 x 3712 projection of their own; hidden 3712; Mamba1 d_inner 7424 (expand 2) as 2 independent SSMs of 3712 channels (each its own x_proj and dt_proj), state 16, dt rank 232, conv 4 with bias; no linear biases; RMSNorm 1e-5, vocab 32000 (the Mistral v0.1 tokenizer), tied embeddings, 4096 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# The Mamba layers decode by recomputing each step's whole sequence (no KV cache for a recurrent stack).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_zamba_7b_hf2mcore.sh), bf16.
#   bash examples/zamba/generate_zamba_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/zamba/generate_zamba_7b_ptd.sh     # seconds on the CPU: a tiny random zamba model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/zamba/generate_zamba_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/zamba-7b-mcore-tp2pp1}    # ckpt_convert_zamba_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba-7B-v1}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=zamba HF_CONFIG='{"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"], "n_mamba_heads": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true, "mamba_proj_bias": false, "hidden_act": "gelu", "hidden_mamba_act": "silu", "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_generate
