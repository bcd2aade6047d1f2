#!/usr/bin/env bash
# Generate text with Zamba2-2.7B (Zyphra/Zamba2-2.7B): 54 Mamba2 layers, 9 of them (layers 6, 12, ..., 42, 47, 51) first running one of 2 shared attention blocks (ABAB) on [hidden; word embeddings] (32 heads of 160 over 2 x 2560 channels, softmax scale (160/2)^-0.5, no positions; a GeGLU MLP of 10240) with per-depth MLP adapters of rank 128 and a 2560 x 2560 projection of their own; hidden 2560; Mamba2 d_inner 5120 (expand 2) in 80 heads of 64, 1 B/C group, state 64, conv 4 with bias, SSD chunk 256, dt clamped below at 0.001; no linear biases; RMSNorm 1e-5, vocab 32000 (the Mistral v0.1 tokenizer), tied embeddings, 4096 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# The Mamba layers decode by recomputing each step's whole sequence (no KV cache for a recurrent stack).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_zamba2_2p7b_hf2mcore.sh), bf16.
#   bash examples/zamba2/generate_zamba2_2p7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/zamba2/generate_zamba2_2p7b_ptd.sh     # seconds on the CPU: a tiny random zamba2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/zamba2/generate_zamba2_2p7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/zamba2-2p7b-mcore-tp2pp1}    # ckpt_convert_zamba2_2p7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Zamba2-2.7B}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=zamba2 HF_CONFIG='{"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid", "linear_attention", "hybrid"], "n_mamba_heads": 2, "mamba_d_state": 64, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_ngroups": 1, "chunk_size": 256, "num_mem_blocks": 2, "adapter_rank": 128, "use_shared_attention_adapter": false, "use_mem_rope": false, "hidden_act": "gelu", "rms_norm_eps": 1e-05, "time_step_min": 0.001, "add_bias_linear": false, "tie_word_embeddings": true, "max_position_embeddings": 4096}'

recipe_generate
