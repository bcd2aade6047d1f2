#!/usr/bin/env bash
# Generate text with c4ai-command-r7b-12-2024 (CohereForAI/c4ai-command-r7b-12-2024 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers with interleaved RoPE theta 50000, every 4th layer full attention without RoPE, logits times 0.25, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_command_r7b_7b_hf2mcore.sh), bf16.
#   bash examples/cohere2/generate_command_r7b_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere2/generate_command_r7b_7b_ptd.sh     # seconds on the CPU: a tiny random cohere2 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/cohere2/generate_command_r7b_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/command-r7b-7b-mcore-tp8pp1}    # ckpt_convert_command_r7b_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r7b-12-2024}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere2 HF_CONFIG='{"layer_norm_eps": 1e-05, "logit_scale": 0.25, "rope_theta": 50000.0, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"], "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 132096}'

recipe_generate
