#!/usr/bin/env bash
# Generate text with MiniMax-Text-01 (MiniMaxAI/MiniMax-Text-01, 456B total, 45.9B active): 80 layers, lightning attention in all but every eighth layer (1-based 8, 16, ..., 80), which is softmax attention; hidden 6144; 64 heads of 128 (lightning: the same heads, q/k/v by SiLU, fixed per-head decays, an all-heads RMSNorm and a sigmoid output gate; attention: 8 KV heads, RoPE over half the head, theta 10000000); every layer a Mixtral MoE: 32 experts of 9216, top-2 of the softmax, renormalised; post-norm weighed residuals (each add keeps the normed input times 3.5566); RMSNorm 1e-5, vocab 200064, untied.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 32 node(s) x 8 devices, TP=4 PP=8 EP=8 (the layout of ckpt_convert_minimax_text_01_456b_hf2mcore.sh), bf16.
#   bash examples/minimax/generate_minimax_text_01_456b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minimax/generate_minimax_text_01_456b_ptd.sh     # seconds on the CPU: a tiny random minimax model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/minimax/generate_minimax_text_01_456b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-32}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minimax-text-01-mcore-tp4pp8ep8}    # ckpt_convert_minimax_text_01_456b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-Text-01}

TP=${TP:-4} PP=${PP:-8} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minimax HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "head_dim": 16, "num_key_value_heads": 2, "num_local_experts": 32, "num_experts_per_tok": 2, "full_attn_alpha_factor": 3.5565588200778455, "linear_attn_alpha_factor": 3.5565588200778455, "mlp_alpha_factor": 3.5565588200778455, "full_attn_beta_factor": 1.0, "linear_attn_beta_factor": 1.0, "mlp_beta_factor": 1.0, "block_size": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.5}, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "pad_token_id": 0}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
