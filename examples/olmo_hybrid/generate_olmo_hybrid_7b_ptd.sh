#!/usr/bin/env bash
# Generate text with Olmo-Hybrid-7B (allenai/Olmo-Hybrid-7B): 32 layers, every 4th softmax attention (8), the others gated DeltaNet (24), each with a SwiGLU MLP of 11008, hidden 3840; attention 30 heads of 128 (no GQA), Olmo3's output norms only and q/k RMSNorm over all heads' channels, no positions (rope_theta null); DeltaNet layers with Llama's pre-norms, 30 key / 30 value heads of 96 / 192, conv 4, beta in (0, 2) (linear_allow_neg_eigval), gated output norm eps 1e-5; RMSNorm 1e-6, vocab 100352, untied, 65536 positions.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 4 devices, TP=2 PP=2 (the layout of ckpt_convert_olmo_hybrid_7b_hf2mcore.sh), bf16.
#   bash examples/olmo_hybrid/generate_olmo_hybrid_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo_hybrid/generate_olmo_hybrid_7b_ptd.sh     # seconds on the CPU: a tiny random olmo_hybrid model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/olmo_hybrid/generate_olmo_hybrid_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo-hybrid-7b-mcore-tp2pp2}    # ckpt_convert_olmo_hybrid_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Olmo-Hybrid-7B}

TP=${TP:-2} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo_hybrid HF_CONFIG='{"num_hidden_layers": 4, "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"], "linear_conv_kernel_dim": 4, "linear_allow_neg_eigval": true, "attention_bias": false, "rms_norm_eps": 1e-06, "rope_parameters": {"rope_type": "default", "rope_theta": null}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'

recipe_generate
