#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# HY-V3 (tencent/HY-V3 (transformers' HYV3Config defaults) config.json): 80 layers (the first dense), hidden 4096, dense FFN 13312, 64 heads / 8 KV heads of dim 128, per-head q/k RMSNorm before RoPE, vocab 120832, rope theta 11158840, RMSNorm 1e-5, no biases, untied; 192 experts of FFN 1536, top-8 by sigmoid score + expert bias, renormalised, times 2.826 (router_scaling_factor), one shared expert of 1536.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 4 node(s) x 8 devices, TP=1 PP=1 EP=32 (ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/hy_v3/evaluate_hy_v3_295b_a21b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/hy_v3/evaluate_hy_v3_295b_a21b_mmlu_ptd.sh     # seconds on the CPU: a tiny random hy_v3 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/hy_v3/evaluate_hy_v3_295b_a21b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-4}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/hy-v3-295b-a21b-mcore-tp1pp1ep32}    # ckpt_convert_hy_v3_295b_a21b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/hy-v3-295b-a21b-mcore-tp1pp1ep32
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/HY-V3}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/hy_v3_295b_a21b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-32}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=hy_v3 HF_CONFIG='{"num_experts": 192, "num_experts_per_tok": 8, "moe_intermediate_size": 32, "num_shared_experts": 1, "router_scaling_factor": 2.826, "mlp_layer_types": ["dense", "sparse"], "attention_bias": false, "mlp_bias": false, "head_dim": 16, "rms_norm_eps": 1e-05, "rope_theta": 11158840.0, "tie_word_embeddings": false, "max_position_embeddings": 131072}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
