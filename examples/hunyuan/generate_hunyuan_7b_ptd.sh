#!/usr/bin/env bash
# Generate text with Hunyuan-7B-Pretrain (tencent/Hunyuan-7B-Pretrain config.json; see examples/README.md): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128167, RMSNorm 1e-5, per-head q/k RMSNorm after RoPE, rope theta 10000 with NTK alpha 1000 (dynamic with a fixed alpha: base 10000 x 1000 ** (128 / 126)), no biases, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_hunyuan_7b_hf2mcore.sh), bf16.
#   bash examples/hunyuan/generate_hunyuan_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan/generate_hunyuan_7b_ptd.sh     # seconds on the CPU: a tiny random hunyuan_v1_dense model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/hunyuan/generate_hunyuan_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hunyuan-7b-mcore-tp8pp1}    # ckpt_convert_hunyuan_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-7B-Pretrain}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_dense HF_CONFIG='{"rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 262144}'

recipe_generate
