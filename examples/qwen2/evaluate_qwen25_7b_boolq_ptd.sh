#!/usr/bin/env bash
# Evaluate on BoolQ (dev.jsonl: passage, question; " yes" or " no" by log-likelihood):
# Qwen2.5-7B (Qwen/Qwen2.5-7B config.json): 28 layers, hidden 3584, FFN 18944, 28 heads / 4 KV heads, vocab 152064, rope theta 1000000, RMSNorm 1e-6, untied embeddings, qkv bias.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (boolq.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_qwen25_7b_hf2mcore.sh), bf16.
#   bash examples/qwen2/evaluate_qwen25_7b_boolq_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen2/evaluate_qwen25_7b_boolq_ptd.sh     # seconds on the CPU: a tiny random qwen2 model with the same behaviour flags, a tiny BoolQ in its published layout
#   DRY_RUN=1 bash examples/qwen2/evaluate_qwen25_7b_boolq_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-6000}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen25-7b-mcore-tp4pp1}    # ckpt_convert_qwen25_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen2.5-7B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./boolq/data}    # boolq/data/dev.jsonl
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen25_7b/}
EVAL_BATCH_SIZE=${EVAL_BATCH_SIZE:-4}
MAX_EVAL_SAMPLES=${MAX_EVAL_SAMPLES:-}

TP=${TP:-4} PP=${PP:-1}
PRECISION=(--bf16)
# SMOKE=1: the model's behaviour fields, as in its config.json, on tiny sizes; a tiny BoolQ
inference_setup qwen2 '{"rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false}' boolq

GPT_ARGS=(
    --use-checkpoint-args --load "$CKPT_LOAD_DIR"
    --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP"
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
    "${PRECISION[@]}"
)
EVAL_ARGS=(
    --task boolq --task-data-path "$TASK_DATA_PATH"
    --evaluation-batch-size "$EVAL_BATCH_SIZE" ${MAX_EVAL_SAMPLES:+--max-eval-samples "$MAX_EVAL_SAMPLES"}
    --output-file "$OUTPUT_FILE"
)

run_evaluation
