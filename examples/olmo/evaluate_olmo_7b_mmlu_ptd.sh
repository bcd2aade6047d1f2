#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# OLMo-7B-hf (allenai/OLMo-7B-hf config.json = transformers' OlmoConfig() defaults): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 50304, rope theta 10000, LayerNorm without weight or bias (eps 1e-5), SwiGLU, no biases, no q/k/v clipping (clip_qkv null), untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_olmo_7b_hf2mcore.sh), bf16.
#   bash examples/olmo/evaluate_olmo_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo/evaluate_olmo_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random olmo model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/olmo/evaluate_olmo_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo-7b-mcore-tp8pp1}    # ckpt_convert_olmo_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-7B-hf}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/olmo_7b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo HF_CONFIG='{"clip_qkv": null, "rope_theta": 10000.0, "tie_word_embeddings": false, "max_position_embeddings": 2048}'

recipe_evaluate mmlu
