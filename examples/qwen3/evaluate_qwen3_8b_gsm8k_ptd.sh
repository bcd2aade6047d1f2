#!/usr/bin/env bash
# Evaluate on GSM8K (test.jsonl, up to 4 solved train.jsonl problems as shots; greedy answers, the number after #### (or \boxed{}, or the last number) must match):
# Qwen3-8B (Qwen/Qwen3-8B config.json): 36 layers, hidden 4096, FFN 12288, 32 heads / 8 KV heads, head dim 128, vocab 151936, rope theta 1000000, RMSNorm 1e-6, per-head q/k RMSNorm, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (gsm8k.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_qwen3_8b_hf2mcore.sh), bf16.
#   bash examples/qwen3/evaluate_qwen3_8b_gsm8k_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/qwen3/evaluate_qwen3_8b_gsm8k_ptd.sh     # seconds on the CPU: a tiny random qwen3 model with the same behaviour flags, a tiny GSM8K in its published layout
#   DRY_RUN=1 bash examples/qwen3/evaluate_qwen3_8b_gsm8k_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/qwen3-8b-mcore-tp8pp1}    # ckpt_convert_qwen3_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Qwen3-8B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./gsm8k}    # gsm8k/{test,train}.jsonl
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/qwen3_8b/}
MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=qwen3 HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "use_sliding_window": false, "tie_word_embeddings": false, "max_position_embeddings": 40960}'

recipe_evaluate gsm8k
