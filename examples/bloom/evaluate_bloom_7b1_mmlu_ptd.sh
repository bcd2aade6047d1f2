#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# bloom-7b1 (bigscience/bloom-7b1 config.json: 30 layers, hidden 4096, FFN 16384 (4 x hidden), 32 heads (MHA), vocab 250880, ALiBi (no rotary), LayerNorm 1e-5 with bias, a LayerNorm on the word embeddings, Bloom's tanh GELU, biases on every linear, tied embeddings, sequence 2048).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_bloom_7b1_hf2mcore.sh), bf16.
#   bash examples/bloom/evaluate_bloom_7b1_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/bloom/evaluate_bloom_7b1_mmlu_ptd.sh     # seconds on the CPU: a tiny random bloom model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/bloom/evaluate_bloom_7b1_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/bloom-7b1-mcore-tp8pp1}    # ckpt_convert_bloom_7b1_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/bloom-7b1}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/bloom_7b1/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=bloom HF_CONFIG='{"layer_norm_epsilon": 1e-05, "apply_residual_connection_post_layernorm": false, "tie_word_embeddings": true}'

recipe_evaluate mmlu
