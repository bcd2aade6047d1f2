#!/usr/bin/env bash
# Generate text with GPT-Neo 1.3B (EleutherAI/gpt-neo-1.3B config.json = transformers' GPTNeoConfig() defaults): 24 layers, hidden 2048, FFN 8192, 16 heads (MHA), vocab 50257, 2048 learned positions, layers alternating global / local (window 256) attention, no attention scaling, q/k/v without bias, out_proj and MLP with bias, LayerNorm (eps 1e-5), GELU (tanh: gelu_new), tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_gpt_neo_1_3b_hf2mcore.sh), bf16.
#   bash examples/gpt_neo/generate_gpt_neo_1_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gpt_neo/generate_gpt_neo_1_3b_ptd.sh     # seconds on the CPU: a tiny random gpt_neo model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/gpt_neo/generate_gpt_neo_1_3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gpt-neo-1_3b-mcore-tp1pp1}    # ckpt_convert_gpt_neo_1_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gpt-neo-1.3B}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gpt_neo HF_CONFIG='{"attention_types": [[["global", "local"], 1]], "window_size": 256, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_generate
