#!/usr/bin/env bash
# Generate text with gpt-neox-japanese-2.7b (abeja/gpt-neox-japanese-2.7b config.json): 32 layers, hidden 2560, FFN 10240 (4 x hidden), 32 heads (MHA), vocab 32000, rope theta 10000 on every dim, sequential LayerNorm (bias, 1e-5) layers, no linear bias but the last layer's attention output projection, GELU, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh), bf16.
#   bash examples/gpt_neox_japanese/generate_gpt_neox_japanese_2_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neox_japanese/generate_gpt_neox_japanese_2_7b_ptd.sh     # seconds on the CPU: a tiny random gpt_neox_japanese model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gpt_neox_japanese/generate_gpt_neox_japanese_2_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gpt-neox-japanese-2-7b-mcore-tp2pp1}    # ckpt_convert_gpt_neox_japanese_2_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neox-japanese-2.7b}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neox_japanese HF_CONFIG='{"intermediate_multiple_size": 2, "rotary_pct": 1.0, "rotary_emb_base": 10000, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_generate
