#!/usr/bin/env bash
# Evaluate on BoolQ (dev.jsonl: passage, question; " yes" or " no" by log-likelihood):
# Llama-3.1-8B (meta-llama/Llama-3.1-8B config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 128256, rope theta 500000 with llama3 scaling (factor 8), RMSNorm 1e-5, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (boolq.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_llama31_8b_hf2mcore.sh), bf16.
#   bash examples/llama3/evaluate_llama31_8b_boolq_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/llama3/evaluate_llama31_8b_boolq_ptd.sh     # seconds on the CPU: a tiny random llama model with the same behaviour flags, a tiny BoolQ in its published layout
#   DRY_RUN=1 bash examples/llama3/evaluate_llama31_8b_boolq_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/llama31-8b-mcore-tp8pp1}    # ckpt_convert_llama31_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Llama-3.1-8B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./boolq/data}    # boolq/data/dev.jsonl
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/llama31_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=llama HF_CONFIG='{"rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}'

recipe_evaluate boolq
