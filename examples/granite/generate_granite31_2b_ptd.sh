#!/usr/bin/env bash
# Generate text with granite-3.1-2b-base (ibm-granite/granite-3.1-2b-base config.json): 40 layers, hidden 2048, FFN 8192, 32 heads / 8 KV heads, vocab 49155, rope theta 5000000, RMSNorm 1e-5, SwiGLU, no biases, embeddings x 12, residual branches x 0.22, attention scale 0.015625 (attention_multiplier), logits / 8 (logits_scaling), tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_granite31_2b_hf2mcore.sh), bf16.
#   bash examples/granite/generate_granite31_2b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granite/generate_granite31_2b_ptd.sh     # seconds on the CPU: a tiny random granite model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/granite/generate_granite31_2b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/granite31-2b-mcore-tp1pp1}    # ckpt_convert_granite31_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.1-2b-base}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granite HF_CONFIG='{"embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 8.0, "rms_norm_eps": 1e-05, "rope_theta": 5000000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_generate
