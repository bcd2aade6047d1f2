#!/usr/bin/env bash
# Generate text with pythia-1.4b (EleutherAI/pythia-1.4b config.json): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50304, rope theta 10000 on the first 25% of each head's dims, two LayerNorms (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear, GELU, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_pythia_1_4b_hf2mcore.sh), bf16.
#   bash examples/gpt_neox/generate_pythia_1_4b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neox/generate_pythia_1_4b_ptd.sh     # seconds on the CPU: a tiny random gpt_neox model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gpt_neox/generate_pythia_1_4b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/pythia-1-4b-mcore-tp2pp1}    # ckpt_convert_pythia_1_4b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/pythia-1.4b}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neox HF_CONFIG='{"rotary_pct": 0.25, "rotary_emb_base": 10000, "use_parallel_residual": true, "attention_bias": true, "hidden_act": "gelu", "layer_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_generate
