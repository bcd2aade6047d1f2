#!/usr/bin/env bash
# Generate text with Jamba-v0.1 (ai21labs/Jamba-v0.1, 52B parameters, 12B active): 32 HF layers, each a mixer then an MLP (our 64 pattern letters): Mamba1 in 28, attention without positions every 8th layer from layer 4 (4, 12, 20, 28; 32 heads / 8 KV heads of 128), a mixture of 16 experts every 2nd layer from layer 1 (top 2 of the softmax over all experts, not renormalised, aux loss 0.001) and a dense SwiGLU MLP in the others, every FFN 14336; hidden 4096; Mamba1 d_inner 8192 (expand 2), state 16, conv 4 with bias, dt rank 256, dt/B/C RMS-normed with weights (eps 1e-6); no linear biases; RMSNorm 1e-6, vocab 65536, untied embeddings, 262144 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 4 node(s) x 8 devices, TP=1 PP=4 EP=8 (the layout of ckpt_convert_jamba01_52b_hf2mcore.sh), bf16.
#   bash examples/jamba/generate_jamba01_52b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/jamba/generate_jamba01_52b_ptd.sh     # seconds on the CPU: a tiny random jamba model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/jamba/generate_jamba01_52b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/jamba01-52b-mcore-tp1pp4ep8}    # ckpt_convert_jamba01_52b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Jamba-v0.1}

TP=${TP:-1} PP=${PP:-4} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=jamba HF_CONFIG='{"num_hidden_layers": 4, "attn_layer_period": 3, "attn_layer_offset": 2, "expert_layer_period": 2, "expert_layer_offset": 1, "num_experts": 16, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.001, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 262144}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
