#!/usr/bin/env bash
# Generate text with BioGPT 347M (microsoft/biogpt config.json = transformers' BioGptConfig() defaults): 24 layers, hidden 1024, FFN 4096, 16 heads (MHA), vocab 42384, 1024 learned positions read at row position + 2, word embeddings times sqrt(1024), LayerNorm (eps 1e-5: transformers ignores layer_norm_eps 1e-12), GELU, biases on every linear, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_biogpt_347m_hf2mcore.sh), bf16.
#   bash examples/biogpt/generate_biogpt_347m_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/biogpt/generate_biogpt_347m_ptd.sh     # seconds on the CPU: a tiny random biogpt model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/biogpt/generate_biogpt_347m_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/biogpt-347m-mcore-tp1pp1}    # ckpt_convert_biogpt_347m_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/biogpt}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=biogpt HF_CONFIG='{"hidden_act": "gelu", "scale_embedding": true, "tie_word_embeddings": true, "max_position_embeddings": 1024}'

recipe_generate
