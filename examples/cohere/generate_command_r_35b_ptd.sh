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

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-2}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/command-r-35b-mcore-tp8pp2}    # ckpt_convert_command_r_35b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/c4ai-command-r-v01}
PROMPT=${PROMPT:-"The capital of France is"}
PROMPT_FILE=${PROMPT_FILE:-}
OUTPUT_FILE=${OUTPUT_FILE:-}    # a jsonl of prompt, response and the generated token_ids, when set
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-2}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes
inference_setup cohere '{"num_key_value_heads": 4, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "rope_theta": 8000000.0, "use_qk_norm": false, "attention_bias": false, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

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
