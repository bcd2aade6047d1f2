#!/usr/bin/env bash
# Generate text with cwm (facebook/cwm config.json; see examples/README.md): 64 layers, hidden 6144, FFN 21504, 48 heads / 8 KV heads, vocab 128256, rope theta 1e6 with llama3 scaling (factor 16, low 1, high 4, original 8192), sliding window 8192 on every layer but 0, 4, ..., 60, RMSNorm 1e-5, no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 (the layout of ckpt_convert_cwm_32b_hf2mcore.sh), bf16.
#   bash examples/cwm/generate_cwm_32b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cwm/generate_cwm_32b_ptd.sh     # seconds on the CPU: a tiny random cwm model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/cwm/generate_cwm_32b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-2}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/cwm-32b-mcore-tp8pp2}    # ckpt_convert_cwm_32b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/cwm}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-2}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup cwm '{"sliding_window": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 131072, "bos_token_id": 1, "eos_token_id": 2}'

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
