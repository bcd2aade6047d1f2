#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Mamba-2.8B (state-spaces/mamba-2.8b-hf): 64 Mamba layers (no attention, no MLP), hidden 2560, d_inner 5120 (expand 2), state 16, conv 4, dt rank 160, vocab 50280, RMSNorm 1e-5, tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 2 devices, TP=2 PP=1 (the layout of ckpt_convert_mamba_28b_hf2mcore.sh), bf16.
#   bash examples/mamba/evaluate_mamba_28b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mamba/evaluate_mamba_28b_mmlu_ptd.sh     # seconds on the CPU: a tiny random mamba model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/mamba/evaluate_mamba_28b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-2}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mamba-2.8b-mcore-tp2pp1}    # ckpt_convert_mamba_28b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/mamba-2.8b-hf}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/mamba_28b/}

TP=${TP:-2} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mamba HF_CONFIG='{"state_size": 16, "expand": 2, "conv_kernel": 4, "time_step_rank": 160, "use_bias": false, "use_conv_bias": true, "hidden_act": "silu", "layer_norm_epsilon": 1e-05, "residual_in_fp32": true, "tie_word_embeddings": true}'

recipe_evaluate mmlu
