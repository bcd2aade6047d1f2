#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# FalconMamba-7B (tiiuae/falcon-mamba-7b): 64 Mamba layers (no attention, no MLP), hidden 4096, d_inner 8192 (expand 2), state 16, conv 4, dt rank 256, weightless RMS norms on dt, B and C (eps 1e-6), vocab 65024, RMSNorm 1e-5, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_falcon_mamba_7b_hf2mcore.sh), bf16.
#   bash examples/falcon_mamba/evaluate_falcon_mamba_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/falcon_mamba/evaluate_falcon_mamba_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random falcon_mamba model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/falcon_mamba/evaluate_falcon_mamba_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/falcon-mamba-7b-mcore-tp4pp1}    # ckpt_convert_falcon_mamba_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/falcon-mamba-7b}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/falcon_mamba_7b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=falcon_mamba HF_CONFIG='{"state_size": 16, "expand": 16, "conv_kernel": 4, "time_step_rank": 256, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-05, "mixer_rms_eps": 1e-06, "residual_in_fp32": true, "tie_word_embeddings": false}'

recipe_evaluate mmlu
