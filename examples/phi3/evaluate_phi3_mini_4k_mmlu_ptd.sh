#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Phi-3-mini-4k-instruct (microsoft/Phi-3-mini-4k-instruct config.json): 32 layers, hidden 3072, FFN 8192, 32 heads (MHA), vocab 32064, rope theta 10000, RMSNorm 1e-5, sliding window 2047, untied embeddings (fused qkv_proj and gate_up_proj, split by the converter).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 4 devices, TP=4 PP=1 (the layout of ckpt_convert_phi3_mini_4k_hf2mcore.sh), bf16.
#   bash examples/phi3/evaluate_phi3_mini_4k_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/phi3/evaluate_phi3_mini_4k_mmlu_ptd.sh     # seconds on the CPU: a tiny random phi3 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/phi3/evaluate_phi3_mini_4k_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-4}}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/phi3-mini-4k-mcore-tp4pp1}    # ckpt_convert_phi3_mini_4k_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Phi-3-mini-4k-instruct}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/phi3_mini_4k/}

TP=${TP:-4} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=phi3 HF_CONFIG='{"num_key_value_heads": 4, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 8, "tie_word_embeddings": false, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "pad_token_id": null}'

recipe_evaluate mmlu
