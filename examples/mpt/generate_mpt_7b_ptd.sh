#!/usr/bin/env bash
# Generate text with mpt-7b (mosaicml/mpt-7b config.json: 32 layers, d_model 4096, FFN 16384 (expansion ratio 4), 32 heads (MHA), vocab 50432, ALiBi with alibi_bias_max 8 (no rotary), LayerNorm 1e-5 without bias, exact GELU, no linear biases, no q/k/v clipping, default softmax scale, tied embeddings, max_seq_len 2048).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_mpt_7b_hf2mcore.sh), bf16.
#   bash examples/mpt/generate_mpt_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mpt/generate_mpt_7b_ptd.sh     # seconds on the CPU: a tiny random mpt model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mpt/generate_mpt_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mpt-7b-mcore-tp8pp1}    # ckpt_convert_mpt_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mpt-7b}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mpt HF_CONFIG='{"max_seq_len": 2048, "no_bias": true, "layer_norm_epsilon": 1e-05, "attn_config": {"alibi": true, "alibi_bias_max": 8, "clip_qkv": null, "softmax_scale": null}, "tie_word_embeddings": true}'

recipe_generate
