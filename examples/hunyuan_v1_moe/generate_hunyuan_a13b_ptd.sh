#!/usr/bin/env bash
# Generate text with Hunyuan-A13B-Pretrain: 32 layers, hidden 4096, 32 heads / 8 KV heads (head dim 128), vocab 128167, rope theta 10000 with dynamic NTK alpha 1000, RMSNorm 1e-5, tied; per-head q/k RMSNorm after RoPE; 64 experts of FFN 3072, top-8 of the softmax over all experts, renormalised, plus one ungated shared expert of 3072.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 4 node(s) x 8 devices, TP=2 PP=2 EP=8 (the layout of ckpt_convert_hunyuan_a13b_hf2mcore.sh), bf16.
#   bash examples/hunyuan_v1_moe/generate_hunyuan_a13b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hunyuan_v1_moe/generate_hunyuan_a13b_ptd.sh     # seconds on the CPU: a tiny random hunyuan_v1_moe model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/hunyuan_v1_moe/generate_hunyuan_a13b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hunyuan-a13b-pretrain-mcore-tp2pp2ep8}    # ckpt_convert_hunyuan_a13b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Hunyuan-A13B-Pretrain}

TP=${TP:-2} PP=${PP:-2} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hunyuan_v1_moe HF_CONFIG='{"num_experts": 64, "moe_topk": [8, 8], "num_shared_expert": [1, 1], "use_mixed_mlp_moe": true, "use_qk_norm": true, "use_cla": false, "rope_theta": 10000.0, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}, "head_dim": 16, "rms_norm_eps": 1e-05, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
