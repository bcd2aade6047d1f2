#!/usr/bin/env bash
# Generate text with Phi-3.5-MoE-instruct: 32 layers, hidden 4096, 32 heads / 8 KV heads, vocab 32064, rope theta 10000 (the published LongRoPE scaling is not supported yet), LayerNorm with bias (eps 1e-5), untied; q/k/v and output biases, lm_head bias; 16 experts of FFN 6400, SparseMixer top-2 routing (eps 0.01).
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=4 PP=4 EP=1 (the layout of ckpt_convert_phi35_moe_42b_hf2mcore.sh), bf16.
#   bash examples/phimoe/generate_phi35_moe_42b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phimoe/generate_phi35_moe_42b_ptd.sh     # seconds on the CPU: a tiny random phimoe model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/phimoe/generate_phi35_moe_42b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi-3.5-moe-instruct-mcore-tp4pp4}    # ckpt_convert_phi35_moe_42b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3.5-MoE-instruct}

TP=${TP:-4} PP=${PP:-4} EP=${EP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phimoe HF_CONFIG='{"num_local_experts": 16, "num_experts_per_tok": 2, "router_jitter_noise": 0.01, "input_jitter_noise": 0.0, "router_aux_loss_coef": 0.001, "attention_bias": true, "lm_head_bias": true, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
