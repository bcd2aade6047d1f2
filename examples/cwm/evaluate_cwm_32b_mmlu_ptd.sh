#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# cwm (facebook/cwm config.json; see examples/README.md): 64 layers, hidden 6144, FFN 21504, 48 heads / 8 KV heads, vocab 128256, rope theta 1e6 with llama3 scaling (factor 16, low 1, high 4, original 8192), sliding window 8192 on every layer but 0, 4, ..., 60, RMSNorm 1e-5, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (ckpt_convert_cwm_32b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/cwm/evaluate_cwm_32b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/cwm/evaluate_cwm_32b_mmlu_ptd.sh     # seconds on the CPU: a tiny random cwm model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/cwm/evaluate_cwm_32b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/cwm-32b-mcore-tp8pp1}    # ckpt_convert_cwm_32b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/cwm-32b-mcore-tp8pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/cwm}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/cwm_32b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=cwm HF_CONFIG='{"sliding_window": 8, "rms_norm_eps": 1e-05, "tie_word_embeddings": false, "max_position_embeddings": 131072, "bos_token_id": 1, "eos_token_id": 2}'

recipe_evaluate mmlu
