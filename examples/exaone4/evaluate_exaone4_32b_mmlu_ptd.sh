#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# EXAONE-4.0-32B (LGAI-EXAONE/EXAONE-4.0-32B config.json): 64 layers, hidden 5120, FFN 27392, 40 heads / 8 KV heads (head dim 128), vocab 102400, rope theta 1000000 with llama3 scaling (factor 16, original 8192) on the sliding-window layers only, RMSNorm 1e-5 after attention and MLP only (no norms before them), per-head q/k RMSNorm, SwiGLU, no biases, sliding window 4096 on 3 of every 4 layers (layers 3, 7, ..., 63 attend fully and without RoPE), untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (ckpt_convert_exaone4_32b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/exaone4/evaluate_exaone4_32b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/exaone4/evaluate_exaone4_32b_mmlu_ptd.sh     # seconds on the CPU: a tiny random exaone4 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/exaone4/evaluate_exaone4_32b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/exaone4-32b-mcore-tp8pp1}    # ckpt_convert_exaone4_32b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/exaone4-32b-mcore-tp8pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/EXAONE-4.0-32B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/exaone4_32b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=exaone4 HF_CONFIG='{"sliding_window": 4096, "layer_types": ["sliding_attention", "full_attention"], "rms_norm_eps": 1e-05, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1000000.0, "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 131072}'

recipe_evaluate mmlu
