#!/usr/bin/env bash
# Generate text with vaultgemma-1b (google/vaultgemma-1b config.json): 26 layers, hidden 1152, FFN 6912, 4 heads / 4 KV heads, head dim 256, vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6 before attention and MLP only (no output norms), embeddings times sqrt(hidden), gated GELU (tanh), softmax scale 256^-0.5, sliding window 512 on even layers (every 2nd layer full), no softcaps, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_vaultgemma_1b_hf2mcore.sh), bf16.
#   bash examples/vaultgemma/generate_vaultgemma_1b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/vaultgemma/generate_vaultgemma_1b_ptd.sh     # seconds on the CPU: a tiny random vaultgemma model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/vaultgemma/generate_vaultgemma_1b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/vaultgemma-1b-mcore-tp1pp1}    # ckpt_convert_vaultgemma_1b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/vaultgemma-1b}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=vaultgemma HF_CONFIG='{"head_dim": 32, "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "attn_logit_softcapping": null, "final_logit_softcapping": null, "sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 1024}'

recipe_generate
