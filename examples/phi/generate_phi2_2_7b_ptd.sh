#!/usr/bin/env bash
# Generate text with phi-2 (microsoft/phi-2 config.json): 32 layers, hidden 2560, FFN 10240, 32 heads (MHA), vocab 51200, rope theta 10000 on the first 40% of each head's dims, one LayerNorm (bias, 1e-5) feeding attention and MLP in parallel, biases on every linear and the untied output layer, GELU (tanh).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_phi2_2_7b_hf2mcore.sh), bf16.
#   bash examples/phi/generate_phi2_2_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi/generate_phi2_2_7b_ptd.sh     # seconds on the CPU: a tiny random phi model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/phi/generate_phi2_2_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi2-2-7b-mcore-tp2pp1}    # ckpt_convert_phi2_2_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/phi-2}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "hidden_act": "gelu_new", "layer_norm_eps": 1e-05, "qk_layernorm": false, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_generate
