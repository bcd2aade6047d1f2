#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# FlexOlmo-7x7B-1T: transformers' FlexOlmoConfig() defaults, whose docstring names this checkpoint: 32 layers, hidden 4096, 32 heads / 32 KV heads, vocab 100352, rope theta 500000, RMSNorm 1e-6, untied; norms after attention and MLP only, q/k RMSNorm over all heads' channels; 7 experts of FFN 11008, top-5 of the softmax over all experts (not renormalised), router aux loss coefficient 0.01.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=8 PP=1 EP=1 (ckpt_convert_flexolmo_7x7b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/flex_olmo/evaluate_flexolmo_7x7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/flex_olmo/evaluate_flexolmo_7x7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random flex_olmo model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/flex_olmo/evaluate_flexolmo_7x7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/flexolmo-7x7b-1t-mcore-tp8pp1}    # ckpt_convert_flexolmo_7x7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/flexolmo-7x7b-1t-mcore-tp8pp1
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/FlexOlmo-7x7B-1T}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/flexolmo_7x7b/}

TP=${TP:-8} PP=${PP:-1} EP=${EP:-1}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=flex_olmo HF_CONFIG='{"num_experts": 7, "num_experts_per_tok": 5, "norm_topk_prob": false, "router_aux_loss_coef": 0.01, "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "attention_bias": false, "tie_word_embeddings": false, "pad_token_id": 1, "eos_token_id": 2, "max_position_embeddings": 4096}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
