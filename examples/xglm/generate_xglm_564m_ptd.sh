#!/usr/bin/env bash
# Generate text with XGLM 564M (facebook/xglm-564M config.json = transformers' XGLMConfig() defaults): 24 layers, hidden 1024, FFN 4096, 16 heads (MHA), vocab 256008, fixed sinusoidal positions (fairseq layout, row position + 2), word embeddings times sqrt(1024), LayerNorm (eps 1e-5), GELU, biases on every linear, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_xglm_564m_hf2mcore.sh), bf16.
#   bash examples/xglm/generate_xglm_564m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/xglm/generate_xglm_564m_ptd.sh     # seconds on the CPU: a tiny random xglm model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/xglm/generate_xglm_564m_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/xglm-564m-mcore-tp1pp1}    # ckpt_convert_xglm_564m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/xglm-564M}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=xglm HF_CONFIG='{"activation_function": "gelu", "scale_embedding": true, "pad_token_id": 1, "tie_word_embeddings": true, "max_position_embeddings": 2048}'

recipe_generate
