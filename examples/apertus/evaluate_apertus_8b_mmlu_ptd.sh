#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Apertus-8B-2509 (swiss-ai/Apertus-8B-2509 config.json): 32 layers, hidden 4096, FFN 21504, 32 heads / 8 KV heads, vocab 131072, rope theta 12000000 with llama3 scaling (factor 8, original 8192), RMSNorm 1e-5, per-head q/k RMSNorm, non-gated xIELU MLP with learnable alphas per layer, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_apertus_8b_hf2mcore.sh), bf16.
#   bash examples/apertus/evaluate_apertus_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/apertus/evaluate_apertus_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random apertus model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/apertus/evaluate_apertus_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/apertus-8b-mcore-tp8pp1}    # ckpt_convert_apertus_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Apertus-8B-2509}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/apertus_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=apertus HF_CONFIG='{"hidden_act": "xielu", "rms_norm_eps": 1e-05, "attention_bias": false, "rope_parameters": {"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, "tie_word_embeddings": false, "max_position_embeddings": 65536, "dtype": "float32"}'

recipe_evaluate mmlu
