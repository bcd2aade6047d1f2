#!/usr/bin/env bash
# Generate text with falcon-7b (tiiuae/falcon-7b config.json): 32 layers, hidden 4544, FFN 18176, 71 heads with one K/V head (multi-query), vocab 65024, rope theta 10000, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, no linear bias, GELU, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=1 PP=4 (the layout of ckpt_convert_falcon_7b_hf2mcore.sh), bf16.
#   bash examples/falcon/generate_falcon_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon/generate_falcon_7b_ptd.sh     # seconds on the CPU: a tiny random falcon model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/falcon/generate_falcon_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/falcon-7b-mcore-tp1pp4}    # ckpt_convert_falcon_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-7b}

TP=${TP:-1} PP=${PP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon HF_CONFIG='{"num_attention_heads": 4, "multi_query": true, "new_decoder_architecture": false, "parallel_attn": true, "bias": false, "alibi": false, "activation": "gelu", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_generate
