#!/usr/bin/env bash
# Evaluate on MMLU (57 subjects' test CSVs, up to 5 solved dev questions per subject as shots; the answer letter of highest log-likelihood wins):
# Mixtral-8x7B-v0.1 (mistralai/Mixtral-8x7B-v0.1 config.json): 32 layers, hidden 4096, FFN 14336, 32 heads / 8 KV heads, vocab 32000, rope theta 1000000, RMSNorm 1e-5, untied embeddings; 8 experts of FFN 14336, top-2 (softmax over the top-2 logits), router aux loss coefficient 0.02.
# evaluation.py takes every architecture flag from the converted checkpoint (--use-checkpoint-args); prompts are
# wrapped in the tokenizer's chat template when it has one. Per-subject and overall accuracy are printed and
# written as JSON to OUTPUT_FILE (mmlu.json in that directory). MAX_EVAL_SAMPLES=N: the first N questions of each
# subject (default: every question).
# Layout: 1 node(s) x 8 devices, TP=2 PP=1 EP=4 (ckpt_convert_mixtral_8x7b_hf2mcore.sh at PP=1: evaluation.py runs at PP 1), bf16.
#   bash examples/mixtral/evaluate_mixtral_8x7b_mmlu_ptd.sh             # the real run (set the paths below)
#   SMOKE=1 bash examples/mixtral/evaluate_mixtral_8x7b_mmlu_ptd.sh     # seconds on the CPU: a tiny random mixtral model with the same behaviour flags, a tiny MMLU in its published layout
#   DRY_RUN=1 bash examples/mixtral/evaluate_mixtral_8x7b_mmlu_ptd.sh   # print the command and validate its flags, the checkpoint's settings and the benchmark's files
source "$(dirname "$0")/../common/recipe.sh"

CKPT_LOAD_DIR=${CKPT_LOAD_DIR:-./model_weights/mixtral-8x7b-mcore-tp2pp1ep4}    # ckpt_convert_mixtral_8x7b_hf2mcore.sh run with PP=1 CKPT_SAVE_DIR=./model_weights/mixtral-8x7b-mcore-tp2pp1ep4
TOKENIZER_PATH=${TOKENIZER_PATH:-./model_from_hf/Mixtral-8x7B-v0.1}
TASK_DATA_PATH=${TASK_DATA_PATH:-./mmlu/data/test}    # mmlu/data/{test,dev}/{subject}_{test,dev}.csv
OUTPUT_FILE=${OUTPUT_FILE:-./eval_results/mixtral_8x7b/}

TP=${TP:-2} PP=${PP:-1} EP=${EP:-4}

# SMOKE=1: a tiny random model of transformers' HF_MODEL_TYPE with the behaviour fields of its config.json
HF_MODEL_TYPE=mixtral HF_CONFIG='{"num_local_experts": 8, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "max_position_embeddings": 32768}'
arg_group LAYOUT_ARGS <<'ARGS'
    --expert-model-parallel-size "$EP"
ARGS

recipe_evaluate mmlu
