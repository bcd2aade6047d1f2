#!/usr/bin/env bash
# Generate text with OPT-1.3B (facebook/opt-1.3b config.json): 24 layers, hidden 2048, FFN 8192, 32 heads (MHA), vocab 50272, 2048 learned positions read at row position + 2, LayerNorm before attention and MLP (eps 1e-5), ReLU, biases on every linear, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_opt_1_3b_hf2mcore.sh), bf16.
#   bash examples/opt/generate_opt_1_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/opt/generate_opt_1_3b_ptd.sh     # seconds on the CPU: a tiny random opt model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/opt/generate_opt_1_3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/opt-1_3b-mcore-tp1pp1}    # ckpt_convert_opt_1_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/opt-1.3b}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=opt HF_CONFIG='{"activation_function": "relu", "do_layer_norm_before": true, "enable_bias": true, "layer_norm_elementwise_affine": true, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_generate
