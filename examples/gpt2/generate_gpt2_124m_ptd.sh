#!/usr/bin/env bash
# Generate text with GPT-2 124M (openai-community/gpt2 config.json = transformers' GPT2Config() defaults): 12 layers, hidden 768, FFN 3072, 12 heads (MHA), vocab 50257, 1024 learned positions, LayerNorm (eps 1e-5), GELU (tanh: gelu_new), biases on every linear, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_gpt2_124m_hf2mcore.sh), bf16.
#   bash examples/gpt2/generate_gpt2_124m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt2/generate_gpt2_124m_ptd.sh     # seconds on the CPU: a tiny random gpt2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gpt2/generate_gpt2_124m_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gpt2-124m-mcore-tp1pp1}    # ckpt_convert_gpt2_124m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt2}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt2 HF_CONFIG='{"activation_function": "gelu_new", "n_inner": null, "layer_norm_epsilon": 1e-05, "scale_attn_weights": true, "tie_word_embeddings": true, "n_positions": 1024}'

recipe_generate
