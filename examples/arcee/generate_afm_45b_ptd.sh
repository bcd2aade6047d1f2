#!/usr/bin/env bash
# Generate text with AFM-4.5B (arcee-ai/AFM-4.5B config.json): 36 layers, hidden 2560, FFN 18432, 20 heads / 4 KV heads, vocab 128004, rope theta 10000 (unscaled; the published YaRN scaling is not modelled: see examples/README.md), RMSNorm 1e-5, non-gated ReLU-squared MLP (up/down only), no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_afm_45b_hf2mcore.sh), bf16.
#   bash examples/arcee/generate_afm_45b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/arcee/generate_afm_45b_ptd.sh     # seconds on the CPU: a tiny random arcee model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/arcee/generate_afm_45b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/afm-45b-mcore-tp4pp1}    # ckpt_convert_afm_45b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/AFM-4.5B}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=arcee HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

recipe_generate
