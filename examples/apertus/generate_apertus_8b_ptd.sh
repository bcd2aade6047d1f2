#!/usr/bin/env bash
# Generate text with Apertus-8B-2509 (swiss-ai/Apertus-8B-2509 config.json): 32 layers, hidden 4096, FFN 21504, 32 heads / 8 KV heads, vocab 131072, rope theta 12000000 with llama3 scaling (factor 8, original 8192), RMSNorm 1e-5, per-head q/k RMSNorm, non-gated xIELU MLP with learnable alphas per layer, no biases, untied embeddings.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_apertus_8b_hf2mcore.sh), bf16.
#   bash examples/apertus/generate_apertus_8b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/apertus/generate_apertus_8b_ptd.sh     # seconds on the CPU: a tiny random apertus model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/apertus/generate_apertus_8b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/apertus-8b-mcore-tp8pp1}    # ckpt_convert_apertus_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Apertus-8B-2509}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-1}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup apertus '{"hidden_act": "xielu", "rms_norm_eps": 1e-05, "attention_bias": false, "rope_parameters": {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "dtype": "float32"}'

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
