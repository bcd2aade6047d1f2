#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# AFM-4.5B (arcee-ai/AFM-4.5B config.json): 36 layers, hidden 2560, FFN 18432, 20 heads / 4 KV heads, vocab 128004, rope theta 10000 (unscaled; the published YaRN scaling is not modelled: see examples/README.md), RMSNorm 1e-5, non-gated ReLU-squared MLP (up/down only), no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_afm_45b_hf2mcore.sh), bf16.
#   bash examples/arcee/evaluate_afm_45b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/arcee/evaluate_afm_45b_mmlu_ptd.sh     # seconds on the CPU: a tiny random arcee model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/arcee/evaluate_afm_45b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/afm-45b-mcore-tp4pp1}    # ckpt_convert_afm_45b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/AFM-4.5B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/afm_45b/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=arcee HF_CONFIG='{"hidden_act": "relu2", "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 65536}'

recipe_evaluate mmlu
