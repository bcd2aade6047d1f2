#!/usr/bin/env bash
# Generate text with FlexOlmo-7x7B-1T: transformers' FlexOlmoConfig() defaults, whose docstring names this checkpoint: 32 layers, hidden 4096, 32 heads / 32 KV heads, vocab 100352, rope theta 500000, RMSNorm 1e-6, untied; norms after attention and MLP only, q/k RMSNorm over all heads' channels; 7 experts of FFN 11008, top-5 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# inference.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); greedy decoding
# (--task greedy) of PROMPT for up to MAX_NEW_TOKENS tokens, the response streamed to stdout as it is generated (more
# prompts: PROMPT_FILE, a jsonl with a "prompt" field per line; OUTPUT_FILE: the responses and token ids as jsonl).
# Layout: 2 node(s) x 8 devices, TP=8 PP=2 EP=1 (the layout of ckpt_convert_flexolmo_7x7b_hf2mcore.sh), bf16.
#   bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh     # seconds on the CPU: a tiny random flex_olmo model with the same behaviour flags, 8 new tokens
#   DRY_RUN=1 bash examples/flex_olmo/generate_flexolmo_7x7b_ptd.sh   # print the command and validate its flags and the checkpoint's settings
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-2}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/flexolmo-7x7b-1t-mcore-tp8pp2}    # ckpt_convert_flexolmo_7x7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/FlexOlmo-7x7B-1T}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-2} EP=${EP:-1}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup flex_olmo '{"num_experts": 7, "num_experts_per_tok": 5, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "pad_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096}'

GPT_ARGS=(
    --use-checkpoint-args --load "$CKPT_LOAD_DIR"
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP" --expert-model-parallel-size "$EP"
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
    "${PRECISION[@]}"
)
GENERATE_ARGS=(
    --task greedy --max-new-tokens "$MAX_NEW_TOKENS"
    --prompt "$PROMPT" ${PROMPT_FILE:+--prompt-file "$PROMPT_FILE"} ${OUTPUT_FILE:+--output-file "$OUTPUT_FILE"}
)

run_inference
