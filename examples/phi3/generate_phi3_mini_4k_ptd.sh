#!/usr/bin/env bash
# Generate text with Phi-3-mini-4k-instruct (microsoft/Phi-3-mini-4k-instruct config.json): 32 layers, hidden 3072, FFN 8192, 32 heads (MHA), vocab 32064, rope theta 10000, RMSNorm 1e-5, sliding window 2047, untied embeddings (fused qkv_proj and gate_up_proj, split by the converter).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_phi3_mini_4k_hf2mcore.sh), bf16.
#   bash examples/phi3/generate_phi3_mini_4k_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi3/generate_phi3_mini_4k_ptd.sh     # seconds on the CPU: a tiny random phi3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/phi3/generate_phi3_mini_4k_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi3-mini-4k-mcore-tp4pp1}    # ckpt_convert_phi3_mini_4k_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3-mini-4k-instruct}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi3 HF_CONFIG='{"num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": false, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "pad_token_id": null}'

recipe_generate
