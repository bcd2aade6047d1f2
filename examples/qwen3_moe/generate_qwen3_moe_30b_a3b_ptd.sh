#!/usr/bin/env bash
# Generate text with Qwen3-30B-A3B: (Qwen/Qwen3-30B-A3B config.json; sizes as MindSpeed-LLM's recipe passes them) 48 layers, all MoE, hidden 2048, 32 heads / 4 KV heads of dim 128, per-head q/k RMSNorm, vocab 151936, rope theta 1000000, RMSNorm 1e-6, untied; 128 experts of FFN 768, top-8 of the softmax over all experts, renormalised (norm_topk_prob), router aux loss coefficient 0.001.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=1 PP=2 EP=8 (the layout of ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh), bf16.
#   bash examples/qwen3_moe/generate_qwen3_moe_30b_a3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3_moe/generate_qwen3_moe_30b_a3b_ptd.sh     # seconds on the CPU: a tiny random qwen3_moe model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/qwen3_moe/generate_qwen3_moe_30b_a3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-moe-30b-a3b-mcore-tp1pp2ep8}    # ckpt_convert_qwen3_moe_30b_a3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-30B-A3B}

TP=${TP:-1} PP=${PP:-2} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3_moe HF_CONFIG='{"num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "norm_topk_prob": true, "decoder_sparse_step": 1, "mlp_only_layers": [], "router_aux_loss_coef": 0.001, "head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
