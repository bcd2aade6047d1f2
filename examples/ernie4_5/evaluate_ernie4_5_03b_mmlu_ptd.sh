#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# ERNIE-4.5-0.3B-Base-PT (baidu/ERNIE-4.5-0.3B-Base-PT config.json; see examples/README.md): 18 layers, hidden 1024, FFN 3072, 16 heads / 2 KV heads, head dim 128, vocab 103424, rope theta 500000 on interleaved pairs, RMSNorm 1e-5, no biases (use_bias false), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_ernie4_5_03b_hf2mcore.sh), bf16.
#   bash examples/ernie4_5/evaluate_ernie4_5_03b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ernie4_5/evaluate_ernie4_5_03b_mmlu_ptd.sh     # seconds on the CPU: a tiny random ernie4_5 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/ernie4_5/evaluate_ernie4_5_03b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ernie4-5-03b-mcore-tp1pp1}    # ckpt_convert_ernie4_5_03b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-0.3B-Base-PT}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ernie4_5_03b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ernie4_5 HF_CONFIG='{"use_bias": false, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "head_dim": 32, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_evaluate mmlu
