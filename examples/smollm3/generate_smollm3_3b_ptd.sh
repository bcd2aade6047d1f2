#!/usr/bin/env bash
# Generate text with SmolLM3-3B (HuggingFaceTB/SmolLM3-3B config.json): 36 layers, hidden 2048, FFN 11008, 16 heads / 4 KV heads, vocab 128256, rope theta 5000000 on 3 of every 4 layers (every 4th layer, 3, 7, ..., 35, is NoPE), RMSNorm 1e-6, SwiGLU, no biases, tied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_smollm3_3b_hf2mcore.sh), bf16.
#   bash examples/smollm3/generate_smollm3_3b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/smollm3/generate_smollm3_3b_ptd.sh     # seconds on the CPU: a tiny random smollm3 model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/smollm3/generate_smollm3_3b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/smollm3-3b-mcore-tp1pp1}    # ckpt_convert_smollm3_3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/SmolLM3-3B}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-1} PP=${PP:-1}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup smollm3 '{"no_rope_layers": [1, 0], "pad_token_id": null, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "use_sliding_window": false, "tie_word_embeddings": true, "max_position_embeddings": 65536}'

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
