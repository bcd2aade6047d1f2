#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# gemma-7b (google/gemma-7b config.json): 28 layers, hidden 3072, FFN 24576, 16 heads (MHA), head dim 256 (16 x 256 = 4096 != hidden), vocab 256000, rope theta 10000, RMSNorm(1 + w) 1e-6, embeddings times sqrt(hidden), gated GELU (tanh approximation, as transformers runs it), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_gemma_7b_hf2mcore.sh), bf16.
#   bash examples/gemma/evaluate_gemma_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/gemma/evaluate_gemma_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random gemma model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/gemma/evaluate_gemma_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/gemma-7b-mcore-tp8pp1}    # ckpt_convert_gemma_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/gemma-7b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/gemma_7b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=gemma HF_CONFIG='{"num_key_value_heads": 4, "head_dim": 32, "hidden_act": "gelu", "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "tie_word_embeddings": true, "max_position_embeddings": 8192}'

recipe_evaluate mmlu
