#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json): 62 layers, all MoE, hidden 3072, 48 heads / 8 KV heads of dim 128, q/k RMSNorm over all heads' channels, rope theta 5000000 on 64 of 128 dims (rotary_dim), vocab 200064, RMSNorm 1e-6, no biases, untied; 256 experts of FFN 1536 (--ffn-hidden-size), top-8 by sigmoid score + expert bias, renormalised, no shared expert, router aux loss coefficient 0.001.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 8 node(s) x 8 devices, TP=1 PP=1 EP=64 (ckpt_convert_minimax_m2_230b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/minimax_m2/evaluate_minimax_m2_230b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/minimax_m2/evaluate_minimax_m2_230b_mmlu_ptd.sh     # seconds on the CPU: a tiny random minimax_m2 model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/minimax_m2/evaluate_minimax_m2_230b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

NNODES=${NNODES:-8}

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/minimax-m2-230b-mcore-tp1pp1ep64}    # ckpt_convert_minimax_m2_230b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/minimax-m2-230b-mcore-tp1pp1ep64
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/MiniMax-M2}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/minimax_m2_230b/}

TP=${TP:-1} PP=${PP:-1} EP=${EP:-64}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=minimax_m2 HF_CONFIG='{"num_local_experts": 256, "num_experts_per_tok": 8, "intermediate_size": 32, "head_dim": 16, "rotary_dim": 8, "router_aux_loss_coef": 0.001, "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "tie_word_embeddings": false, "max_position_embeddings": 196608, "bos_token_id": 1, "eos_token_id": 2}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
