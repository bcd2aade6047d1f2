#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Ministral-3-8B-Base-2512 (text model) (mistralai/Ministral-3-8B-Base-2512 config.json; see examples/README.md): 34 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 131072, rope theta 1e6 with YaRN (factor 16, original 16384, beta 32 / 1, mscale 1 / 1), Llama-4 query temperature 0.1 per 16384 positions, RMSNorm 1e-5, no biases, untied embeddings.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 (the layout of ckpt_convert_ministral3_8b_hf2mcore.sh), bf16.
#   bash examples/ministral3/evaluate_ministral3_8b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ministral3/evaluate_ministral3_8b_mmlu_ptd.sh     # seconds on the CPU: a tiny random ministral3 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/ministral3/evaluate_ministral3_8b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ministral3-8b-mcore-tp8pp1}    # ckpt_convert_ministral3_8b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Ministral-3-8B-Base-2512-text}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ministral3_8b/}

TP=${TP:-8} PP=${PP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ministral3 HF_CONFIG='{"rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0, "original_max_position_embeddings": 16384, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}, "rms_norm_eps": 1e-05, "head_dim": 16, "tie_word_embeddings": false, "max_position_embeddings": 262144, "pad_token_id": 0}'

recipe_evaluate mmlu
