#!/usr/bin/env bash
# Generate text with c4ai-command-r-v01 (CohereForAI/c4ai-command-r-v01 config.json): 40 layers, hidden 8192, FFN 22528, 64 heads (MHA), vocab 256000, one bias-free LayerNorm (eps 1e-5) feeding attention and MLP in parallel, SwiGLU, no biases, interleaved RoPE theta 8000000, logits times 0.0625, no q/k norms (use_qk_norm false), tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 (the layout of ckpt_convert_command_r_35b_hf2mcore.sh), bf16.
#   bash examples/cohere/generate_command_r_35b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cohere/generate_command_r_35b_ptd.sh     # seconds on the CPU: a tiny random cohere model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/cohere/generate_command_r_35b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-2}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/command-r-35b-mcore-tp8pp2}    # ckpt_convert_command_r_35b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r-v01}

TP=${TP:-8} PP=${PP:-2}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cohere HF_CONFIG='{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "rope_theta": 8000000.0, "use_qk_norm": false, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_generate
