#!/usr/bin/env bash
# Generate text with Jais-2-8B (inceptionai/Jais-2-8B: 32 layers, hidden 3328, FFN 26624, 26 heads (MHA, head dim 128), vocab 150272, rope theta 10000, LayerNorm 1e-5 with bias, non-gated ReLU-squared MLP, biases on every linear, untied embeddings, 8192 positions (see examples/README.md for which numbers are verified)).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=2 PP=2 (the layout of ckpt_convert_jais2_8b_hf2mcore.sh), bf16.
#   bash examples/jais2/generate_jais2_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/jais2/generate_jais2_8b_ptd.sh     # seconds on the CPU: a tiny random jais2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/jais2/generate_jais2_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/jais2-8b-mcore-tp2pp2}    # ckpt_convert_jais2_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jais-2-8B}

TP=${TP:-2} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=jais2 HF_CONFIG='{"hidden_act": "relu2", "attention_bias": true, "mlp_bias": true, "layer_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 8192}'

recipe_generate
