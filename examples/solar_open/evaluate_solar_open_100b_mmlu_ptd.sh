#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Solar-Open-100B (upstage/Solar-Open-100B config.json): 48 layers, all MoE, hidden 4096, 64 heads / 8 KV heads of dim 128, vocab 196608, rope theta 1000000, RMSNorm 1e-5, no biases, untied; 128 experts of FFN 1280, top-8 by sigmoid score + expert bias, renormalised, routed_scaling_factor 1.0, one shared expert of 1280 (--ffn-hidden-size 1280: no layer is dense).
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=2 PP=1 EP=16 (ckpt_convert_solar_open_100b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/solar_open/evaluate_solar_open_100b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/solar_open/evaluate_solar_open_100b_mmlu_ptd.sh     # seconds on the CPU: a tiny random solar_open model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/solar_open/evaluate_solar_open_100b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/solar-open-100b-mcore-tp2pp1ep16}    # ckpt_convert_solar_open_100b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/solar-open-100b-mcore-tp2pp1ep16
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Solar-Open-100B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/solar_open_100b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-16}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=solar_open HF_CONFIG='{"n_routed_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "n_shared_experts": 1, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": true, "attention_bias": false, "head_dim": 16, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
