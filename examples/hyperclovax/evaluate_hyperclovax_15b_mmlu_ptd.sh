#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# HyperCLOVAX-SEED-Text-Instruct-1.5B (naver-hyperclovax/HyperCLOVAX-SEED-Text-Instruct-1.5B config.json): 24 layers, hidden 2048, FFN 7168, 16 heads / 8 KV heads, vocab 110592, rope theta 50000000, RMSNorm 1e-5 before and after attention and MLP (peri-norm, use_post_norm), SwiGLU, no biases, Granite-style multipliers all 1 (attention scale 128^-0.5), untied embeddings (sizes unverified: see examples/README.md).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 1 devices, TP=1 PP=1 (the layout of ckpt_convert_hyperclovax_15b_hf2mcore.sh), bf16.
#   bash examples/hyperclovax/evaluate_hyperclovax_15b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hyperclovax/evaluate_hyperclovax_15b_mmlu_ptd.sh     # seconds on the CPU: a tiny random hyperclovax model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/hyperclovax/evaluate_hyperclovax_15b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-1}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hyperclovax-15b-mcore-tp1pp1}    # ckpt_convert_hyperclovax_15b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HyperCLOVAX-SEED-Text-Instruct-1.5B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/hyperclovax_15b/}

TP=${TP:-1} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hyperclovax HF_CONFIG='{"use_post_norm": true, "rms_norm_eps": 1e-05, "rope_theta": 50000000.0, "embedding_multiplier": 1.0, "residual_multiplier": 1.0, "logits_scaling": 1.0, "tie_word_embeddings": false, "max_position_embeddings": 16384}'

recipe_evaluate mmlu
