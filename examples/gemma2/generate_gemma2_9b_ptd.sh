#!/usr/bin/env bash
# Generate text with gemma-2-9b (google/gemma-2-9b config.json): 42 layers, hidden 3584, FFN 14336, 16 heads / 8 KV heads, head dim 256, vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6 before and after attention and MLP, embeddings times sqrt(hidden), gated GELU (tanh), attention softcap 50, final softcap 30, softmax scale 256^-0.5, sliding window 4096 on even layers (every 2nd layer full), tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_gemma2_9b_hf2mcore.sh), bf16.
#   bash examples/gemma2/generate_gemma2_9b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma2/generate_gemma2_9b_ptd.sh     # seconds on the CPU: a tiny random gemma2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gemma2/generate_gemma2_9b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gemma2-9b-mcore-tp8pp1}    # ckpt_convert_gemma2_9b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-2-9b}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma2 HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_generate
