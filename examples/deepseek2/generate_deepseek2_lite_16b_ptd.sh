#!/usr/bin/env bash
# Generate text with DeepSeek-V2-Lite (deepseek-ai/DeepSeek-V2-Lite config.json; see examples/README.md): 27 layers, hidden 2048, dense FFN 10944 (first layer), 16 heads (MLA: no q latent, kv latent 512, q/k 128 + rope 64, v 128), vocab 102400, rope theta 10000 with YaRN (factor 40, original 4096, mscale 0.707 / 0.707), interleaved RoPE, RMSNorm 1e-6, untied; 64 experts of FFN 1408, top-6 (softmax over all experts, greedy), 2 shared experts, sequence aux loss 0.001.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (the layout of ckpt_convert_deepseek2_lite_16b_hf2mcore.sh), bf16.
#   bash examples/deepseek2/generate_deepseek2_lite_16b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/deepseek2/generate_deepseek2_lite_16b_ptd.sh     # seconds on the CPU: a tiny random deepseek_v2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/deepseek2/generate_deepseek2_lite_16b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/deepseek2-lite-16b-mcore-tp1pp1ep8}    # ckpt_convert_deepseek2_lite_16b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/DeepSeek-V2-Lite}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=deepseek_v2 HF_CONFIG='{"n_routed_experts": 64, "num_experts_per_tok": 6, "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_intermediate_size": 32, "kv_lora_rank": 32, "q_lora_rank": null, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4, "topk_method": "greedy", "n_group": 1, "topk_group": 1, "norm_topk_prob": false, "routed_scaling_factor": 1.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": false, "max_position_embeddings": 163840, "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 40.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707}}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_generate
