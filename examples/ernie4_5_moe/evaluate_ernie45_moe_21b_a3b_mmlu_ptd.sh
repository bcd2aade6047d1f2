#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# ERNIE-4.5-21B-A3B (baidu/ERNIE-4.5-21B-A3B-PT config.json): 28 layers (the first dense), hidden 2560, dense FFN 12288, 20 heads / 4 KV heads, vocab 103424, rope theta 500000 in interleaved pairs, RMSNorm 1e-5, no biases, tied embeddings; 64 experts of FFN 1536, softmax over all experts, top-6 by probability + expert bias (moe_statics.e_score_correction_bias), renormalised, two shared experts (2 x 1536), router aux loss coefficient 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=1 PP=1 EP=8 (the layout of ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh), bf16.
#   bash examples/ernie4_5_moe/evaluate_ernie45_moe_21b_a3b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/ernie4_5_moe/evaluate_ernie45_moe_21b_a3b_mmlu_ptd.sh     # seconds on the CPU: a tiny random ernie4_5_moe model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/ernie4_5_moe/evaluate_ernie45_moe_21b_a3b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/ernie45-moe-21b-a3b-mcore-tp1pp1ep8}    # ckpt_convert_ernie45_moe_21b_a3b_hf2mcore.sh
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/ERNIE-4.5-21B-A3B}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/ernie45_moe_21b_a3b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-8}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=ernie4_5_moe HF_CONFIG='{"moe_num_experts": 64, "moe_k": 6, "moe_intermediate_size": 32, "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_end_index": -1, "moe_layer_interval": 1, "use_bias": false, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": true, "max_position_embeddings": 131072, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
