#!/usr/bin/env bash
# Generate text with MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json): 62 layers, all MoE, hidden 3072, 48 heads / 8 KV heads of dim 128, q/k RMSNorm over all heads' channels, rope theta 5000000 on 64 of 128 dims (rotary_dim), vocab 200064, RMSNorm 1e-6, no biases, untied; 256 experts of FFN 1536 (--ffn-hidden-size), top-8 by sigmoid score + expert bias, renormalised, no shared expert, router aux loss coefficient 0.001.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 16 node(s) x 8 devices, TP=1 PP=2 EP=64 (the layout of ckpt_convert_minimax_m2_230b_hf2mcore.sh), bf16.
#   bash examples/minimax_m2/generate_minimax_m2_230b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minimax_m2/generate_minimax_m2_230b_ptd.sh     # seconds on the CPU: a tiny random minimax_m2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/minimax_m2/generate_minimax_m2_230b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-16}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minimax-m2-230b-mcore-tp1pp2ep64}    # ckpt_convert_minimax_m2_230b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-M2}

TP=${TP:-1} PP=${PP:-2} EP=${EP:-64}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minimax_m2 HF_CONFIG='{"num_local_experts": 256, "num_experts_per_tok": 8, "intermediate_size": 32, "head_dim": 16, "rotary_dim": 8, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "tie_word_embeddings": false, "max_position_embeddings": 196608, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
