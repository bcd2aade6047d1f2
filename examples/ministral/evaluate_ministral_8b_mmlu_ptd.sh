#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Ministral-8B-Instruct-2410 (mistralai/Ministral-8B-Instruct-2410 config.json): 36 layers, hidden 4096, FFN 12288, 32 heads / 8 KV heads, head dim 128, vocab 131072, rope theta 100000000, RMSNorm 1e-5, untied embeddings; its sliding_window 32768 equals max positions, so no token is ever outside it (no window flag).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_ministral_8b_hf2mcore.sh), bf16.
#   bash examples/ministral/evaluate_ministral_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ministral/evaluate_ministral_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random ministral model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/ministral/evaluate_ministral_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ministral-8b-mcore-tp8pp1}    # ckpt_convert_ministral_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-8B-Instruct-2410}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ministral_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral HF_CONFIG='{"head_dim": 32, "rms_norm_eps": 1e-05, "rope_theta": 100000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'

recipe_evaluate mmlu
