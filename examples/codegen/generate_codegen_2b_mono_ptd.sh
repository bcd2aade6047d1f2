#!/usr/bin/env bash
# Generate text with codegen-2B-mono (Salesforce/codegen-2B-mono config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, interleaved rope (base 10000) on the first 64 of 80 dims per head, GPT-J's parallel layer (one LayerNorm, bias, 1e-5), biases on the MLP and the untied output layer only, GELU (tanh); q/v/k fused in 4 blocks (the converter reorders them).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_codegen_2b_mono_hf2mcore.sh), bf16.
#   bash examples/codegen/generate_codegen_2b_mono_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/codegen/generate_codegen_2b_mono_ptd.sh     # seconds on the CPU: a tiny random codegen model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/codegen/generate_codegen_2b_mono_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/codegen-2b-mono-mcore-tp2pp1}    # ckpt_convert_codegen_2b_mono_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/codegen-2B-mono}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=codegen HF_CONFIG='{"rotary_dim": 12, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "tie_word_embeddings": false, "n_positions": 2048, "n_ctx": 2048, "bos_token_id": 0, "eos_token_id": 1}'

recipe_generate
