#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# OLMo-2-1124-7B (allenai/OLMo-2-1124-7B config.json): 32 layers, hidden 4096, FFN 11008, 32 heads (MHA), vocab 100352, rope theta 500000, RMSNorm 1e-6 on the attention and MLP outputs only (no norm before them), q/k RMSNorm over all heads' channels, SwiGLU, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_olmo2_7b_hf2mcore.sh), bf16.
#   bash examples/olmo2/evaluate_olmo2_7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/olmo2/evaluate_olmo2_7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random olmo2 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/olmo2/evaluate_olmo2_7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/olmo2-7b-mcore-tp8pp1}    # ckpt_convert_olmo2_7b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/OLMo-2-1124-7B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/olmo2_7b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=olmo2 HF_CONFIG='{"rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "max_position_embeddings": 4096}'

recipe_evaluate mmlu
