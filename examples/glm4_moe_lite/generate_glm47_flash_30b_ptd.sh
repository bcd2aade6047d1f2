#!/usr/bin/env bash
# Generate text with GLM-4.7-Flash (zai-org/GLM-4.7-Flash config.json; see examples/README.md): 47 layers, hidden 2048, dense FFN 10240 (first layer), 20 heads (MLA: q latent 768, kv latent 512, q/k 192 + rope 64, v 256), vocab 154880, rope theta 10000, interleaved RoPE, RMSNorm 1e-5 (the latent norms 1e-6), untied; 64 experts of FFN 1536, top-4 (sigmoid with the aux-loss-free expert bias, renormalised, times 1.8), 1 shared expert.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=1 PP=1 EP=16 (the layout of ckpt_convert_glm47_flash_30b_hf2mcore.sh), bf16.
#   bash examples/glm4_moe_lite/generate_glm47_flash_30b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/glm4_moe_lite/generate_glm47_flash_30b_ptd.sh     # seconds on the CPU: a tiny random glm4_moe_lite model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/glm4_moe_lite/generate_glm47_flash_30b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/glm47-flash-30b-mcore-tp1pp1ep16}    # ckpt_convert_glm47_flash_30b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/GLM-4.7-Flash}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=glm4_moe_lite HF_CONFIG='{"n_routed_experts": 64, "num_experts_per_tok": 4, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse"], "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "n_group": 1, "topk_group": 1, "norm_topk_prob": true, "routed_scaling_factor": 1.8, "rope_interleave": true, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 202752, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
