#!/usr/bin/env bash
# Generate text with Ministral-3-8B-Base-2512 (text model) (mistralai/Ministral-3-8B-Base-2512 config.json; see examples/README.md): 34 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 131072, rope theta 1e6 with YaRN (factor 16, original 16384, beta 32 / 1, mscale 1 / 1), Llama-4 query temperature 0.1 per 16384 positions, RMSNorm 1e-5, no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_ministral3_8b_hf2mcore.sh), bf16.
#   bash examples/ministral3/generate_ministral3_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ministral3/generate_ministral3_8b_ptd.sh     # seconds on the CPU: a tiny random ministral3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/ministral3/generate_ministral3_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ministral3-8b-mcore-tp8pp1}    # ckpt_convert_ministral3_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-3-8B-Base-2512-text}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral3 HF_CONFIG='{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}, "rms_norm_eps": 1e-05, "head_dim": 16, "tie_word_embeddings": false, "max_position_embeddings": 262144, "pad_token_id": 0}'

recipe_generate
