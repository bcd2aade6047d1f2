#!/usr/bin/env bash
# Generate text with SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): 36 layers, hidden 2048, FFN 11008, 16 heads / 4 KV heads, vocab 128256, rope theta 5000000 on 3 of every 4 layers (every 4th layer, 3, 7, ..., 35, is NoPE), RMSNorm 1e-6, SwiGLU, no biases, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_smollm3_3b_hf2mcore.sh), bf16.
#   bash examples/smollm3/generate_smollm3_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/smollm3/generate_smollm3_3b_ptd.sh     # seconds on the CPU: a tiny random smollm3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/smollm3/generate_smollm3_3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/smollm3-3b-mcore-tp1pp1}    # ckpt_convert_smollm3_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/SmolLM3-3B}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=smollm3 HF_CONFIG='{"no_rope_layers": [1, 0], "pad_token_id": null, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "use_sliding_window": false, "tie_word_embeddings": true, "max_position_embeddings": 65536}'

recipe_generate
