#!/usr/bin/env bash
# Generate text with Mistral-7B-v0.3 (mistralai/Mistral-7B-v0.3 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32768, rope theta 1000000, RMSNorm 1e-5, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_mistral_7b_hf2mcore.sh), bf16.
#   bash examples/mistral/generate_mistral_7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mistral/generate_mistral_7b_ptd.sh     # seconds on the CPU: a tiny random mistral model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/mistral/generate_mistral_7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mistral-7b-mcore-tp8pp1}    # ckpt_convert_mistral_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mistral-7B-v0.3}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-1}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup mistral '{"rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false}'

GPT_ARGS=(
    --use-checkpoint-args --load "$CKPT_LOAD_DIR"
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP"
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
    "${PRECISION[@]}"
)
GENERATE_ARGS=(
    --task greedy --max-new-tokens "$MAX_NEW_TOKENS"
    --prompt "$PROMPT" ${PROMPT_FILE:+--prompt-file "$PROMPT_FILE"} ${OUTPUT_FILE:+--output-file "$OUTPUT_FILE"}
)

run_inference
