#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# granite-3.1-2b-base (ibm-granite/granite-3.1-2b-base config.json): 40 layers, hidden 2048, FFN 8192, 32 heads / 8 KV heads, vocab 49155, rope theta 5000000, RMSNorm 1e-5, SwiGLU, no biases, embeddings x 12, residual branches x 0.22, attention scale 0.015625 (attention_multiplier), logits / 8 (logits_scaling), tied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_granite31_2b_hf2mcore.sh), bf16.
#   bash examples/granite/evaluate_granite31_2b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/granite/evaluate_granite31_2b_mmlu_ptd.sh     # seconds on the CPU: a tiny random granite model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/granite/evaluate_granite31_2b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/granite31-2b-mcore-tp1pp1}    # ckpt_convert_granite31_2b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/granite-3.1-2b-base}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/granite31_2b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=granite HF_CONFIG='{"embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625, "logits_scaling": 8.0, "rms_norm_eps": 1e-05, "rope_theta": 5000000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072}'

recipe_evaluate mmlu
