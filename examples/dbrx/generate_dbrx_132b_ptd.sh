#!/usr/bin/env bash
# Generate text with dbrx-base: 40 layers, hidden 6144, 48 heads / 8 KV heads, vocab 100352, rope theta 500000, LayerNorm without bias (eps 1e-5), untied; fused Wqkv clamped to [-8, 8]; 16 experts of FFN 10752, top-4 of the softmax over all experts, renormalised, router aux loss coefficient 0.05.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 8 node(s) x 8 devices, TP=4 PP=2 EP=8 (the layout of ckpt_convert_dbrx_132b_hf2mcore.sh), bf16.
#   bash examples/dbrx/generate_dbrx_132b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/dbrx/generate_dbrx_132b_ptd.sh     # seconds on the CPU: a tiny random dbrx model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/dbrx/generate_dbrx_132b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/dbrx-base-mcore-tp4pp2ep8}    # ckpt_convert_dbrx_132b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/dbrx-base}

TP=${TP:-4} PP=${PP:-2} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=dbrx HF_CONFIG='{"d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": 256, "attn_config": {"clip_qkv": 8, "kv_n_heads": 2, "rope_theta": 500000}, "ffn_config": {"ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 128, "moe_num_experts": 16, "moe_top_k": 4, "moe_jitter_eps": 0, "moe_loss_weight": 0.05, "moe_normalize_expert_weights": 1.0}, "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}, "tie_word_embeddings": false}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
