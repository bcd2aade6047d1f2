#!/usr/bin/env bash
# Generate text with RWKV-4-Pile-7B (RWKV/rwkv-4-7b-pile): 32 blocks, each time mixing (token shift, the WKV recurrence with a learned decay and bonus per channel, 4096 wide) then channel mixing (token shift, squared ReLU of 16384, a sigmoid receptance): our 64 pattern letters WC; hidden 4096, LayerNorm 1e-5 with biases and one on the embeddings, no positions, vocab 50277, untied, 1024-token context.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_rwkv4_7b_hf2mcore.sh), bf16.
#   bash examples/rwkv/generate_rwkv4_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/rwkv/generate_rwkv4_7b_ptd.sh     # seconds on the CPU: a tiny random rwkv model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/rwkv/generate_rwkv4_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/rwkv4-7b-mcore-tp2pp1}    # ckpt_convert_rwkv4_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/rwkv-4-7b-pile}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=rwkv HF_CONFIG='{"num_hidden_layers": 2, "context_length": 1024, "layer_norm_epsilon": 1e-05, "rescale_every": 6, "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 0}'

recipe_generate
