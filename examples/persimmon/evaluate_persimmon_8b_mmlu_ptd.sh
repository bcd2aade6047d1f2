#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# persimmon-8b-base (adept/persimmon-8b-base config.json): 36 layers, hidden 4096, FFN 16384, 64 heads (MHA), vocab 262144, rope theta 25000 on the first half of each head's dims, sequential LayerNorm (bias, 1e-5) layers, per-head q/k LayerNorms with bias, biases on every linear, ReLU squared, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_persimmon_8b_hf2mcore.sh), bf16.
#   bash examples/persimmon/evaluate_persimmon_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/persimmon/evaluate_persimmon_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random persimmon model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/persimmon/evaluate_persimmon_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/persimmon-8b-mcore-tp8pp1}    # ckpt_convert_persimmon_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/persimmon-8b-base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/persimmon_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=persimmon HF_CONFIG='{"num_key_value_heads": 4, "partial_rotary_factor": 0.5, "rope_theta": 25000.0, "hidden_act": "relu2", "layer_norm_eps": 1e-05, "qk_layernorm": true, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_evaluate mmlu
