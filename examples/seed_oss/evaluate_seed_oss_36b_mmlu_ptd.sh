#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Seed-OSS-36B-Base (ByteDance-Seed/Seed-OSS-36B-Base config.json; see examples/README.md): 64 layers, hidden 5120, FFN 27648, 80 heads / 8 KV heads, head dim 128, vocab 155136, rope theta 1e7, RMSNorm 1e-6, q/k/v bias only (attention_bias; no o_proj or MLP bias), untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (ckpt_convert_seed_oss_36b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/seed_oss/evaluate_seed_oss_36b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/seed_oss/evaluate_seed_oss_36b_mmlu_ptd.sh     # seconds on the CPU: a tiny random seed_oss model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/seed_oss/evaluate_seed_oss_36b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/seed-oss-36b-mcore-tp8pp1}    # ckpt_convert_seed_oss_36b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/seed-oss-36b-mcore-tp8pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Seed-OSS-36B-Base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/seed_oss_36b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=seed_oss HF_CONFIG='{"attention_bias": true, "attention_out_bias": false, "mlp_bias": false, "rms_norm_eps": 1e-06, "rope_theta": 10000000.0, "head_dim": 32, "tie_word_embeddings": false, "max_position_embeddings": 524288, "attention_dropout": 0.0, "residual_dropout": 0.0}'

recipe_evaluate mmlu
