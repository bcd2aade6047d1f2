#!/usr/bin/env bash
# Generate text with Olmo-3-1025-7B (allenai/Olmo-3-1025-7B config.json; sizes seen in public copies, rope as remembered: see examples/README.md): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 100278, RMSNorm 1e-6 on the attention and MLP outputs only, q/k RMSNorm over all heads' channels, sliding window 4096 on 3 of every 4 layers (every 4th full), rope theta 500000 (unscaled on every layer: the pretraining stage, before the YaRN context extension), SwiGLU, no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_olmo3_7b_hf2mcore.sh), bf16.
#   bash examples/olmo3/generate_olmo3_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo3/generate_olmo3_7b_ptd.sh     # seconds on the CPU: a tiny random olmo3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/olmo3/generate_olmo3_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo3-7b-mcore-tp8pp1}    # ckpt_convert_olmo3_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-3-1025-7B}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo3 HF_CONFIG='{"sliding_window": 8, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

recipe_generate
